use clap::Parser;
use duet::config::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_env("DUET_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_logs(args.log_format);
            let server = duet::server::start(&args).await?;
            tracing::info!(model = %args.model, "duet listening on http://{}", server.addr);
            println!("duet listening on http://{}", server.addr);
            server.task.await??;
        }
        Command::MoshiTiny(args) => {
            duet_models::moshi::tiny::write_tiny_dir(&args.out, args.seed, args.q8)?;
            println!(
                "wrote a tiny random Moshi to {}; try: duet serve --model moshi --model-dir {}",
                args.out.display(),
                args.out.display()
            );
        }
    }
    Ok(())
}
