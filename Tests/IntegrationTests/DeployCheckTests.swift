import Foundation
import Testing

/// `scripts/check-deploy` renders kustomizations with a real kubectl and
/// refuses one that does not render.
@Suite("Deploy check")
struct DeployCheckTests {
    /// A copy of `deploy/kubernetes` and `Config` (which the base's
    /// ConfigMaps are built from) with the repository's layout.
    static func copyOfDeploy() throws -> URL {
        let root = try TestPaths.temporaryDirectory("livedispatch-deploy")
        let manager = FileManager.default
        try manager.createDirectory(at: root.appendingPathComponent("deploy"), withIntermediateDirectories: true)
        try manager.copyItem(
            at: TestPaths.repositoryRoot.appendingPathComponent("deploy/kubernetes"), to: root.appendingPathComponent("deploy/kubernetes"))
        try manager.copyItem(at: TestPaths.repositoryRoot.appendingPathComponent("Config"), to: root.appendingPathComponent("Config"))
        return root
    }

    static func check(_ kustomization: URL) throws -> ProcessResult {
        try runProcess(
            ["kustomization", kustomization.path], executable: TestPaths.repositoryRoot.appendingPathComponent("scripts/check-deploy"))
    }

    @Test("a copy of the example overlay renders and passes; with a patch for a Deployment that does not exist it is refused")
    func brokenOverlayIsRefused() throws {
        let root = try Self.copyOfDeploy()
        let overlay = root.appendingPathComponent("deploy/kubernetes/overlays/example")
        let good = try Self.check(overlay)
        #expect(good.status == 0, "\(good.standardOutput)\(good.standardError)")
        #expect(good.standardOutput.contains("resources rendered by kubectl kustomize"), "\(good.standardOutput)")

        let patch = overlay.appendingPathComponent("deployment-patch.yaml")
        let text = try String(contentsOf: patch, encoding: .utf8)
        let broken = text.replacingOccurrences(of: "\n  name: livedispatch\n", with: "\n  name: livedispatch-renamed\n")
        #expect(broken != text)
        try Data(broken.utf8).write(to: patch)
        let refused = try Self.check(overlay)
        #expect(refused.status == 1)
        #expect(refused.standardOutput.contains("kubectl kustomize cannot render"), "\(refused.standardOutput)")
        #expect(refused.standardOutput.contains("livedispatch-renamed"), "\(refused.standardOutput)")
    }
}
