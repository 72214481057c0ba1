use duet::config::{Command, LogFormat};
use tracing_subscriber::EnvFilter;

/// The log filter without `DUET_LOG`: the SIP stack logs every message whole at `info`
/// (phone numbers, SDP), so it says only warnings.
const DEFAULT_LOG: &str = "info,rsipstack=warn";

fn init_logs(format: LogFormat) {
    let filter =
        EnvFilter::try_from_env("DUET_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Large transient buffers (a retrieved audio item, a decoded clip) are mapped and unmapped
/// on their own: glibc's adaptive threshold would otherwise move them into the heap after
/// the first one is freed, where their freed space stays resident.
fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a malloc tunable; called once, before the server threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = match duet::config_file::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    };
    match cli.command {
        Command::Serve(args) => {
            init_logs(args.log_format);
            return_large_buffers();
            let sockets = duet::server::bind(&args).await?;
            duet::server::run(&args, sockets, duet::server::shutdown_signal()).await?;
            // Engine and model threads are not waited for: the process ends here.
            std::process::exit(0);
        }
        Command::CheckConfig(args) => {
            let problems = duet::config_file::problems(&args);
            if !problems.is_empty() {
                for p in &problems {
                    eprintln!("error: {p}");
                }
                eprintln!("{} problem(s) in the configuration", problems.len());
                std::process::exit(1);
            }
            print!("{}", duet::config_file::effective(&args)?);
            for stage in duet::config_file::stages(&args) {
                eprintln!("{stage}");
            }
            eprintln!("configuration OK");
        }
        Command::MoshiTiny(args) => {
            duet_models::moshi::tiny::write_tiny_dir(&args.out, args.seed, args.q8)?;
            println!(
                "wrote a tiny random Moshi to {}; try: duet serve --model moshi --model-dir {}",
                args.out.display(),
                args.out.display()
            );
        }
        Command::ConvertWhisper(args) => {
            let report = duet_models::whisper::convert_ct2(&args.from, &args.out)?;
            println!("{report}");
        }
    }
    Ok(())
}
