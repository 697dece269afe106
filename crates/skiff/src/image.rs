//! `skiff image`: image store tools. `skiff image import` loads an OCI image layout or a
//! `docker save` archive into the runtime's image store, for sites without registry access
//! (the role of `ctr images import`).
//!
//! It writes the store directly, beside a runtime that may be running on the same root:
//! it leaves the runtime's work in progress alone, and the runtime re-reads the image
//! records when they change, so ListImages / ImageStatus show the imported images at once.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use skiff_runtime::RuntimeConfig;
use skiff_runtime::image::ImageManager;

/// `skiff image` subcommands.
#[derive(Debug, Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Imports the images of an OCI image layout or `docker save` archive (a directory, or a
    /// tar, plain or gzip) and prints each image's ID and tags.
    Import(ImportArgs),
}

/// `skiff image import` flags.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The runtime's persistent state (as `skiff runtime --root`).
    #[arg(long, default_value = "/var/lib/skiff/runtime")]
    pub root: PathBuf,
    /// The archive: an OCI layout directory or tar, or a `docker save` tar.
    pub archive: PathBuf,
}

pub async fn run(args: ImageArgs) -> anyhow::Result<()> {
    match args.command {
        ImageCommand::Import(args) => import(args).await,
    }
}

async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let config = RuntimeConfig {
        root: args.root.clone(),
        ..RuntimeConfig::default()
    };
    let images = ImageManager::attach(&config)
        .with_context(|| format!("opening image store {}", args.root.display()))?;
    let records = images.import(&args.archive).await?;
    for record in records {
        let tags = if record.repo_tags.is_empty() {
            "<untagged>".to_string()
        } else {
            record.repo_tags.join(" ")
        };
        println!("{} {tags}", record.id);
    }
    Ok(())
}
