//! The `skiff-test-registry` binary: serves the pushed busybox image until SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_skiff-test-registry");

fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn serves_the_pushed_image_until_sigterm() {
    let addr = free_addr();
    let mut child = Command::new(BIN)
        .args(["--listen", &addr, "--push", "demo/busybox:v1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, format!("ready {addr}/demo/busybox:v1\n"));

    let agent: ureq::Agent = ureq::Agent::config_builder().proxy(None).build().into();
    let response = agent
        .get(format!("http://{addr}/v2/demo/busybox/manifests/v1"))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .call()
        .unwrap();
    let expected = skiff_testkit::busybox().unwrap();
    assert_eq!(
        response.headers().get("docker-content-digest").unwrap(),
        expected.digest()
    );

    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        TcpStream::connect(&addr).is_err(),
        "registry still listening"
    );
}

#[test]
fn bad_arguments_and_busy_addresses_exit_1() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    for (args, message) in [
        (
            vec!["--listen", "127.0.0.1:1"],
            "--push REPO:TAG is required",
        ),
        (
            vec!["--listen", "127.0.0.1:1", "--push", "no-tag"],
            "has no tag",
        ),
        (
            vec!["--listen", "nowhere", "--push", "a:b"],
            "not an IP:PORT",
        ),
        (
            vec!["--listen", &busy_addr, "--push", "a:b"],
            "cannot listen on",
        ),
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
