import Foundation

/// The worker's container image as `make test` builds it
/// (`scripts/image build livedispatch:test`: the image `make image` builds,
/// a release binary in the shipped Dockerfile's runtime stage), and podman
/// with the project's settings (`scripts/image podman`).
enum ContainerImage {
    static let tag = "localhost/livedispatch:test"
    static let script = TestPaths.repositoryRoot.appendingPathComponent("scripts/image")

    /// Whether podman is installed and the image was built; `make test` builds it before the tests.
    static var isBuilt: Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/podman") else { return false }
        return (try? podman(["image", "exists", tag]).status) == 0
    }

    /// Runs podman to completion.
    static func podman(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(["podman"] + arguments, executable: script)
    }

    /// `podman run` of the image in the background, on the host's network with
    /// a read-only root filesystem, as `name`; `options` go before the image,
    /// `arguments` after it (to the entry point, `livedispatch run --config
    /// /etc/livedispatch/livedispatch.yaml`).
    static func run(
        name: String, environment: [String: String], options: [String] = [], arguments: [String] = []
    ) throws -> WorkerContainer {
        let variables = environment.sorted { $0.key < $1.key }.flatMap { ["-e", "\($0.key)=\($0.value)"] }
        let process = try BackgroundProcess(
            ["podman", "run", "--rm", "--name", name, "--network", "host", "--read-only"] + variables + options + [tag] + arguments,
            executable: script)
        return WorkerContainer(name: name, process: process)
    }
}

/// A container started by ``ContainerImage/run(name:environment:options:arguments:)``.
/// SIGTERM to its `podman run` reaches the worker in it (podman proxies
/// signals) and `podman run` exits with the worker's status. Removed by force
/// when released while still running.
final class WorkerContainer: Sendable {
    let name: String
    let process: BackgroundProcess

    init(name: String, process: BackgroundProcess) {
        self.name = name
        self.process = process
    }

    var isRunning: Bool { process.isRunning }
    var output: [String] { process.standardOutputLines }
    var errors: [String] { process.standardErrorLines }

    /// What an exited container said last, for a failure message.
    var exitDescription: String { "it exited: \(errors.suffix(8))" }

    deinit {
        if process.isRunning {
            _ = try? ContainerImage.podman(["rm", "--force", "--time", "0", name])
        }
    }
}
