import Testing

@testable import LiveDispatchCore

/// The directory of members, fed records as the `members` topic would
/// give them: owners, hand-overs in progress, stale and departed members.
@Suite("member directory")
struct MemberDirectoryTests {
    let t0 = UnixTime(seconds: 1_764_000_000)

    func record(_ address: String, _ partitions: [Int32], at seconds: Double) -> MemberRecord {
        MemberRecord(address: address, partitions: partitions, at: t0 + seconds)
    }

    @Test("each partition claimed by one fresh member is owned by it at its address")
    func owners() {
        var directory = MemberDirectory(staleAfter: 600)
        directory.record(member: "w1", record("10.0.0.1:9464", [0, 2], at: 0))
        directory.record(member: "w2", record("10.0.0.2:9464", [1], at: 0))
        #expect(directory.owner(of: 0, now: t0 + 1) == .member(id: "w1", address: "10.0.0.1:9464"))
        #expect(directory.owner(of: 1, now: t0 + 1) == .member(id: "w2", address: "10.0.0.2:9464"))
        #expect(directory.owner(of: 3, now: t0 + 1) == .unknown)
        #expect(directory.owners(count: 4, now: t0 + 1).mapValues(\.id) == [0: "w1", 1: "w2", 2: "w1"])
    }

    @Test("two fresh claims of one partition leave it contested until the old owner's record drops it")
    func handOver() {
        var directory = MemberDirectory(staleAfter: 600)
        directory.record(member: "w1", record("a:1", [0, 1], at: 0))
        directory.record(member: "w2", record("b:1", [1], at: 5))
        #expect(directory.owner(of: 1, now: t0 + 6) == .contested(["w1", "w2"]))
        #expect(directory.owner(of: 0, now: t0 + 6) == .member(id: "w1", address: "a:1"))
        directory.record(member: "w1", record("a:1", [0], at: 7))
        #expect(directory.owner(of: 1, now: t0 + 8) == .member(id: "w2", address: "b:1"))
    }

    @Test("a member's latest record replaces its earlier one; an older one arriving late is ignored")
    func latestWins() {
        var directory = MemberDirectory(staleAfter: 600)
        directory.record(member: "w1", record("a:1", [0], at: 10))
        directory.record(member: "w1", record("a:2", [3], at: 5))
        #expect(directory.owner(of: 0, now: t0 + 11) == .member(id: "w1", address: "a:1"))
        #expect(directory.owner(of: 3, now: t0 + 11) == .unknown)
        directory.record(member: "w1", record("a:2", [3], at: 20))
        #expect(directory.owner(of: 0, now: t0 + 21) == .unknown)
        #expect(directory.owner(of: 3, now: t0 + 21) == .member(id: "w1", address: "a:2"))
    }

    @Test("a tombstone removes the member; a record older than staleAfter no longer counts")
    func departures() {
        var directory = MemberDirectory(staleAfter: 60)
        directory.record(member: "w1", record("a:1", [0], at: 0))
        directory.record(member: "w2", record("b:1", [1], at: 0))
        directory.record(member: "w1", nil)
        #expect(directory.owner(of: 0, now: t0 + 1) == .unknown)
        #expect(directory.owner(of: 1, now: t0 + 60) == .member(id: "w2", address: "b:1"))
        #expect(directory.owner(of: 1, now: t0 + 61) == .unknown)
        // A stale claimant does not contest a fresh one.
        directory.record(member: "w3", record("c:1", [1], at: 61))
        #expect(directory.owner(of: 1, now: t0 + 62) == .member(id: "w3", address: "c:1"))
        #expect(Array(directory.freshMembers(now: t0 + 62).keys) == ["w3"])
    }

    @Test("a record reads back what it wrote; a bad one is refused with the field's path")
    func records() throws {
        let written = MemberRecord(address: "10.0.0.1:9464", partitions: [2, 0, 2], at: t0)
        #expect(written.partitions == [0, 2])
        #expect(try MemberRecord(bytes: written.json.serialized()) == written)
        #expect(throws: FieldError(field: "partitions[1]", message: "expected a partition number (0 to 2147483647)")) {
            try MemberRecord(bytes: Array(#"{"address":"a:1","partitions":[0,-1],"at":1}"#.utf8))
        }
        #expect(throws: FieldError(field: "address", message: "is required")) {
            try MemberRecord(bytes: Array(#"{"partitions":[],"at":1}"#.utf8))
        }
        #expect(throws: FieldError.self) { try MemberRecord(bytes: Array("[]".utf8)) }
    }
}
