fn main() -> std::process::ExitCode {
    kaiju::commands::main()
}
