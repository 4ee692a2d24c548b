// `sqlx::migrate!` embeds `migrations/` at compile time, but cargo does not know that the
// folder is an input: without this, a new migration file is left out of an incremental build.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
