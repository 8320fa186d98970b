/// One worker's record on the compacted `members` topic (key: its member
/// id): the HTTP address it answers reads at, the `commands` partitions it
/// owns and has restored, and when it wrote them. A tombstone says the
/// member left.
public struct MemberRecord: Sendable, Hashable {
    /// `host:port` of the member's HTTP server (`admin.advertise`).
    public var address: String
    /// Sorted, without duplicates.
    public var partitions: [Int32]
    public var at: UnixTime

    public init(address: String, partitions: [Int32], at: UnixTime) {
        self.address = address
        self.partitions = Array(Set(partitions)).sorted()
        self.at = at
    }

    public var json: JSONValue {
        .object([
            "address": .string(address), "partitions": .array(partitions.map { .integer(Int64($0)) }), "at": .double(at.seconds),
        ])
    }

    /// Reads a record written by ``json``; the error names the field.
    public init(bytes: [UInt8]) throws(FieldError) {
        let reader = try FieldReader(try FieldReader.parse(bytes), what: "a member record")
        let address = try reader.requiredString("address")
        guard !address.isEmpty, address.utf8.count <= 300, !address.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw FieldError(field: reader.name("address"), message: "expected host:port, 1 to 300 bytes without control characters")
        }
        let list = try reader.required("partitions")
        guard let items = list.arrayValue else { throw reader.mismatch("partitions", expected: "an array of partition numbers", got: list) }
        var partitions: [Int32] = []
        for (index, item) in items.enumerated() {
            guard let number = item.integerValue.flatMap({ Int32(exactly: $0) }), number >= 0 else {
                throw FieldError(field: reader.name("partitions[\(index)]"), message: "expected a partition number (0 to 2147483647)")
            }
            partitions.append(number)
        }
        let atValue = try reader.required("at")
        guard let seconds = atValue.numberValue, seconds.isFinite else { throw reader.mismatch("at", expected: "Unix seconds", got: atValue) }
        self.init(address: address, partitions: partitions, at: UnixTime(seconds: seconds))
    }
}

/// Who owns which `commands` partition and at which address, from the
/// records of the `members` topic read in offset order: the latest record
/// of each member wins and a tombstone removes it.
///
/// A partition has an owner only when exactly one fresh member claims it.
/// Two claims (a hand-over in progress: the new owner wrote before the old
/// one's revocation record arrived) or a claim older than `staleAfter` (a
/// member that died without its tombstone, republishing at half that
/// interval otherwise) leave it unknown, and a read then goes to Kafka.
public struct MemberDirectory: Sendable {
    /// Where a read of a partition goes.
    public enum Owner: Sendable, Hashable {
        case member(id: String, address: String)
        /// No member claims it, or only a stale one.
        case unknown
        /// More than one fresh member claims it: a hand-over is under way.
        case contested([String])
    }

    /// Seconds after which a member's record no longer counts.
    public let staleAfter: Double
    private var members: [String: MemberRecord] = [:]
    /// Fresh-or-not claimants of each partition, kept with the records.
    private var claims: [Int32: Set<String>] = [:]

    public init(staleAfter: Double) {
        self.staleAfter = staleAfter
    }

    /// Takes one record of the topic; nil is a tombstone. A record older
    /// than the one held for the member (replayed, or written late) is ignored.
    public mutating func record(member: String, _ record: MemberRecord?) {
        if let record, let held = members[member], held.at > record.at { return }
        if let held = members.removeValue(forKey: member) {
            for partition in held.partitions {
                claims[partition]?.remove(member)
                if claims[partition]?.isEmpty == true { claims[partition] = nil }
            }
        }
        guard let record else { return }
        members[member] = record
        for partition in record.partitions { claims[partition, default: []].insert(member) }
    }

    /// The member that answers reads of `partition` at `now`.
    public func owner(of partition: Int32, now: UnixTime) -> Owner {
        let fresh = (claims[partition] ?? []).filter { isFresh($0, now: now) }.sorted()
        guard let only = fresh.first else { return .unknown }
        guard fresh.count == 1, let record = members[only] else { return .contested(fresh) }
        return .member(id: only, address: record.address)
    }

    /// The owner of each partition of `0..<count` at `now`, for a list
    /// that merges the owners' pages; nil for a partition with no single owner.
    public func owners(count: Int, now: UnixTime) -> [Int32: (id: String, address: String)] {
        var owners: [Int32: (id: String, address: String)] = [:]
        for partition in 0..<Int32(clamping: max(0, count)) {
            if case .member(let id, let address) = owner(of: partition, now: now) { owners[partition] = (id, address) }
        }
        return owners
    }

    /// The members whose records count at `now`, by id.
    public func freshMembers(now: UnixTime) -> [String: MemberRecord] {
        members.filter { isFresh($0.key, now: now) }
    }

    private func isFresh(_ member: String, now: UnixTime) -> Bool {
        guard let record = members[member] else { return false }
        return now.seconds - record.at.seconds <= staleAfter
    }
}
