fn main() -> std::process::ExitCode {
    kaiju::cli::main()
}
