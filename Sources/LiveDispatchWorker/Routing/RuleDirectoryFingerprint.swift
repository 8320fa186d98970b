import Foundation

/// Names, sizes and modification times of a rules directory's files: a
/// change of any means the rules may have changed.
struct RuleDirectoryFingerprint: Equatable {
    var entries: [String]

    init(directory: String) {
        let manager = FileManager.default
        let names = ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.sorted()
        entries = names.map { name in
            let attributes = try? manager.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))
            let size = (attributes?[.size] as? NSNumber)?.intValue ?? -1
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(name):\(size):\(modified)"
        }
    }
}
