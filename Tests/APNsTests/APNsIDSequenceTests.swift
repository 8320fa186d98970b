import Foundation
import Testing
@testable import APNs

@Suite("apns-id sequence")
struct APNsIDSequenceTests {
    @Test("ids are lowercase version-4 UUIDs that never repeat")
    func idsAreUniqueUUIDs() {
        let sequence = APNsIDSequence()
        var seen: Set<String> = []
        var malformed: [String] = []
        for _ in 0..<50_000 {
            let id = sequence.next()
            let bytes = UUID(uuidString: id)?.uuid
            let wellFormed = id.utf8.count == 36 && id == id.lowercased() && bytes.map { $0.6 >> 4 == 4 && $0.8 >> 6 == 0b10 } == true
            if !wellFormed { malformed.append(id) }
            seen.insert(id)
        }
        #expect(malformed.isEmpty, "not lowercase version-4 UUIDs: \(malformed.prefix(3))")
        #expect(seen.count == 50_000)
    }

    @Test("two sequences (two processes) do not share ids")
    func sequencesDiffer() {
        let first = (0..<1_000).map { _ in APNsIDSequence() }.map { $0.next() }
        #expect(Set(first).count == first.count)
    }

    @Test("the counter's scrambling is a bijection on the values it meets")
    func scrambleIsInjective() {
        let scrambled = Set((UInt64(0)..<100_000).map(APNsIDSequence.scramble))
        #expect(scrambled.count == 100_000)
        #expect(APNsIDSequence.format(high: 0, low: 0) == "00000000-0000-4000-8000-000000000000")
        #expect(APNsIDSequence.format(high: .max, low: .max) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }
}
