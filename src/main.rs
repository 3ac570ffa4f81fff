//! The `bir` executable. Everything lives in the library; see `lib.rs`.

fn main() -> std::process::ExitCode {
    bir::main()
}
