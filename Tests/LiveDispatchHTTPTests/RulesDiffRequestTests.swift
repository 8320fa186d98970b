import Foundation
@testable import LiveDispatchHTTP
import LiveDispatchRules
import Testing

@Suite("Rules diff requests")
struct RulesDiffRequestTests {
    @Test("a file name is a plain YAML name: no path, no hidden file, no other suffix")
    func fileNames() {
        for name in ["sports.yaml", "goal_rules-2.yml", "a.b.yaml"] { #expect(WorkerAPI.isRuleFileName(name), "\(name)") }
        for name in ["../sports.yaml", "/etc/x.yaml", "sub/x.yaml", ".hidden.yaml", "x.json", "", "spö.yaml", "x.yaml\u{0}", String(repeating: "a", count: 101) + ".yaml"] {
            #expect(!WorkerAPI.isRuleFileName(name), "\(name.debugDescription)")
        }
    }

    @Test("the given files replace the directory's file of the same name and are added beside the others")
    func replacing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "old sports".write(to: directory.appendingPathComponent("sports.yaml"), atomically: true, encoding: .utf8)
        try "delivery".write(to: directory.appendingPathComponent("delivery.yaml"), atomically: true, encoding: .utf8)
        let files = try WorkerAPI.files(replacing: ["sports.yaml": "new sports", "extra.yml": "extra"], in: directory.path)
        let byName = Dictionary(uniqueKeysWithValues: files.map { (($0.name as NSString).lastPathComponent, $0.text) })
        #expect(byName == ["sports.yaml": "new sports", "delivery.yaml": "delivery", "extra.yml": "extra"])
        // Named inside the directory, so a diagnostic never shows the server's path.
        #expect(Set(files.map(\.name)) == ["sports.yaml", "delivery.yaml", "extra.yml"])
        do {
            _ = try RuleSet.compile(files: files)
            Issue.record("the files are not rules")
        } catch {
            #expect(!error.diagnostics.isEmpty)
            for diagnostic in error.diagnostics { #expect(!diagnostic.description.contains(directory.path), "\(diagnostic)") }
        }
    }
}
