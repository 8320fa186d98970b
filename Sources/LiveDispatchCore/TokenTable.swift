/// The tokens of one activity with a value each, in dense arrays, found by
/// an open-addressing hash index of 4-byte slots.
///
/// A `[DeviceToken: Value]` costs a hash bucket per entry plus the
/// dictionary's load-factor slack on the whole entry; here the slack is on
/// a 4-byte index only, and an entry is one token and one value side by
/// side. A token's slot (its position in the dense arrays) is stable until
/// some token is removed: removal moves the last token into the freed slot
/// (swap-remove) and says which token moved, so an owner that keeps slots
/// elsewhere (a queue) can follow it.
public struct TokenTable<Value: Sendable>: Sendable {
    public private(set) var tokens: [DeviceToken] = []
    public private(set) var values: [Value] = []
    /// Linear probing; 0 is an empty bucket, otherwise the slot plus one.
    private var index: [UInt32] = []

    public init() {}

    public var count: Int { tokens.count }
    public var isEmpty: Bool { tokens.isEmpty }

    /// The slot holding `token`, if any.
    public func slot(of token: DeviceToken) -> Int? {
        guard !index.isEmpty else { return nil }
        let mask = index.count - 1
        var bucket = token.hashValue & mask
        while true {
            let entry = index[bucket]
            if entry == 0 { return nil }
            let slot = Int(entry) - 1
            if tokens[slot] == token { return slot }
            bucket = (bucket + 1) & mask
        }
    }

    /// The value of `token`; setting nil removes it, as in a dictionary.
    public subscript(token: DeviceToken) -> Value? {
        get { slot(of: token).map { values[$0] } }
        set {
            if let newValue { insert(token, newValue) } else { remove(token) }
        }
    }

    /// The value at `slot` (0 ..< ``count``).
    public subscript(slot slot: Int) -> Value {
        get { values[slot] }
        set { values[slot] = newValue }
    }

    /// Adds `token` with `value`, or replaces the value of a token already
    /// here; returns its slot.
    @discardableResult
    public mutating func insert(_ token: DeviceToken, _ value: Value) -> Int {
        if let slot = slot(of: token) {
            values[slot] = value
            return slot
        }
        makeRoomForOneMore()
        let slot = tokens.count
        tokens.append(token)
        values.append(value)
        place(slot)
        return slot
    }

    /// Adds `token` with `value` unless it is here already (then nothing
    /// changes); one probe of the index either way. True when added.
    @discardableResult
    public mutating func insertIfAbsent(_ token: DeviceToken, _ value: Value) -> Bool {
        makeRoomForOneMore()
        let mask = index.count - 1
        var bucket = token.hashValue & mask
        while index[bucket] != 0 {
            if tokens[Int(index[bucket]) - 1] == token { return false }
            bucket = (bucket + 1) & mask
        }
        index[bucket] = UInt32(truncatingIfNeeded: tokens.count + 1)
        tokens.append(token)
        values.append(value)
        return true
    }

    /// What a removal did: the value removed, and the token that moved from
    /// the last slot into the freed one (nil when the removed token was last).
    public struct Removal {
        public var value: Value
        public var moved: (token: DeviceToken, from: Int, to: Int)?
    }

    /// Removes `token`; nil when it is not here.
    @discardableResult
    public mutating func remove(_ token: DeviceToken) -> Removal? {
        guard let slot = slot(of: token) else { return nil }
        return remove(slot: slot)
    }

    /// Removes the token at `slot` (0 ..< ``count``).
    @discardableResult
    public mutating func remove(slot: Int) -> Removal {
        unplace(slot)
        let last = tokens.count - 1
        var moved: (token: DeviceToken, from: Int, to: Int)?
        if slot != last {
            unplace(last)
            tokens.swapAt(slot, last)
            values.swapAt(slot, last)
            place(slot)
            moved = (tokens[slot], last, slot)
        }
        tokens.removeLast()
        let value = values.removeLast()
        if tokens.isEmpty {
            tokens = []
            values = []
            index = []
        }
        return Removal(value: value, moved: moved)
    }

    public mutating func removeAll() {
        tokens = []
        values = []
        index = []
    }

    private func bucket(of slot: Int) -> Int {
        let mask = index.count - 1
        var bucket = tokens[slot].hashValue & mask
        while Int(index[bucket]) != slot + 1 { bucket = (bucket + 1) & mask }
        return bucket
    }

    private mutating func place(_ slot: Int) {
        let mask = index.count - 1
        var bucket = tokens[slot].hashValue & mask
        while index[bucket] != 0 { bucket = (bucket + 1) & mask }
        index[bucket] = UInt32(truncatingIfNeeded: slot + 1)
    }

    /// Empties the bucket of `slot`, shifting back the entries after it
    /// that probed past it so that no lookup stops early (no tombstones).
    private mutating func unplace(_ slot: Int) {
        let mask = index.count - 1
        var hole = bucket(of: slot)
        index[hole] = 0
        var next = (hole + 1) & mask
        while index[next] != 0 {
            let home = tokens[Int(index[next]) - 1].hashValue & mask
            // The entry may move into the hole if its home is not in (hole, next].
            let distanceToNext = (next - home) & mask
            let distanceToHole = (hole - home) & mask
            if distanceToHole < distanceToNext {
                index[hole] = index[next]
                index[next] = 0
                hole = next
            }
            next = (next + 1) & mask
        }
    }

    /// Makes room for `count` tokens in all, e.g. before adding a known
    /// number of them (a restore).
    public mutating func reserveCapacity(_ count: Int) {
        guard count > tokens.count else { return }
        tokens.reserveCapacity(count)
        values.reserveCapacity(count)
        var buckets = Swift.max(16, index.count)
        while count * 4 > buckets * 3 { buckets *= 2 }
        if buckets > index.count { rebuildIndex(buckets) }
    }

    private mutating func makeRoomForOneMore() {
        if tokens.count == tokens.capacity {
            // A quarter more at a time, not twice as much: a table of a
            // thousand tokens would otherwise hold room for up to a thousand more.
            let capacity = tokens.count + Swift.max(8, tokens.count / 4)
            tokens.reserveCapacity(capacity)
            values.reserveCapacity(capacity)
        }
        if (tokens.count + 1) * 4 > index.count * 3 { rebuildIndex(Swift.max(16, index.count * 2)) }
    }

    private mutating func rebuildIndex(_ buckets: Int) {
        index = [UInt32](repeating: 0, count: buckets)
        for slot in tokens.indices { place(slot) }
    }
}
