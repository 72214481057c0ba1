//! What the step benchmarks share: option parsing, statistics and memory readings.

use duet_models::moshi::DeviceSpec;

/// The parsed options, or the error on stderr (prefixed with the benchmark's `name`) and
/// exit status 2.
pub fn or_exit<T>(r: Result<T, String>, name: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{name}: {e}");
        std::process::exit(2);
    })
}

/// A comma-separated list of counts (`1,16,64`).
pub fn counts(list: &str) -> Result<Vec<usize>, String> {
    list.split(',')
        .map(|s| s.trim().parse().map_err(|_| format!("bad count {s:?}")))
        .collect()
}

/// The `p` quantile of sorted values (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The process's resident memory and its peak, in MiB.
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn gpu_mib() -> Option<f64> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=memory.used", "--format=csv,noheader,nounits"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The GPU memory column: `-` on the CPU, `?` when `nvidia-smi` gives nothing.
pub fn gpu_column(device: &DeviceSpec) -> String {
    if *device == DeviceSpec::Cpu {
        "-".to_string()
    } else {
        gpu_mib().map_or("?".into(), |g| format!("{g:.0}"))
    }
}

/// The KV cache of one stream when full, in MiB (f32 on the CPU, bf16 on a GPU).
pub fn kv_mib(num_layers: usize, context: usize, d_model: usize, device: &DeviceSpec) -> f64 {
    let kv_bytes = if *device == DeviceSpec::Cpu { 4 } else { 2 };
    (num_layers * 2 * context * d_model * kv_bytes) as f64 / (1 << 20) as f64
}
