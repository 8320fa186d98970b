import LiveDispatchCore
import Testing

extension SplitMix64 {
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
}

@Suite("device tokens inline and on the heap")
struct DeviceTokenTests {
    @Test("a token of at most 32 bytes is inline, a longer one on the heap, both with their bytes")
    func inlineAndHeap() throws {
        var generator = SplitMix64(seed: 1)
        for count in [1, 7, 8, 9, 31, 32, 33, 64, 100, DeviceToken.maxBytes] {
            let bytes = generator.bytes(count)
            let token = try DeviceToken(bytes: bytes)
            #expect(token.isInline == (count <= 32))
            #expect(token.count == count)
            #expect(token.bytes == bytes)
            #expect((0..<count).map { token[$0] } == bytes)
        }
        #expect(MemoryLayout<DeviceToken>.stride <= 40)
    }

    @Test("hex round-trips in either case, for every length")
    func hexRoundTrip() throws {
        var generator = SplitMix64(seed: 2)
        for count in 1...DeviceToken.maxBytes {
            let bytes = generator.bytes(count)
            let hex = bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
            let token = try DeviceToken(hex: hex.uppercased())
            #expect(token.hex == hex)
            #expect(token.description == hex)
            #expect(try DeviceToken(hex: token.hex) == token)
            #expect(token.bytes == bytes)
        }
    }

    @Test("equality, hashing and order agree with the bytes across lengths")
    func equalityHashOrder() throws {
        var generator = SplitMix64(seed: 3)
        var samples: [[UInt8]] = []
        for count in [1, 2, 8, 16, 31, 32, 33, 40] {
            let bytes = generator.bytes(count)
            samples.append(bytes)
            samples.append(Array(bytes.dropLast()).isEmpty ? [0] : Array(bytes.dropLast()))
            samples.append(bytes + [0])
            samples.append([0] + bytes)
        }
        samples.append(Array(repeating: 0xFF, count: 32))
        samples.append(Array(repeating: 0xFF, count: 33))
        samples.append(Array(repeating: 0, count: 32))
        samples.append(Array(repeating: 0, count: 33))
        let tokens = try samples.map { bytes throws(ValueError) in try DeviceToken(bytes: bytes) }
        for (left, leftBytes) in zip(tokens, samples) {
            for (right, rightBytes) in zip(tokens, samples) {
                #expect((left == right) == (leftBytes == rightBytes))
                #expect((left < right) == leftBytes.lexicographicallyPrecedes(rightBytes))
                if leftBytes == rightBytes { #expect(left.hashValue == right.hashValue) }
            }
        }
        #expect(Set(tokens).count == Set(samples).count)
    }
}

@Suite("the token table of an activity")
struct TokenTableTests {
    func token(_ number: Int, count: Int = 32) throws -> DeviceToken {
        try DeviceToken(bytes: (0..<count).map { UInt8(truncatingIfNeeded: number >> (8 * ($0 % 4))) ^ UInt8($0) })
    }

    @Test("insert, lookup, replace and remove")
    func basics() throws {
        var table = TokenTable<Int>()
        #expect(table.isEmpty)
        #expect(table[try token(1)] == nil)
        let first = table.insert(try token(1), 10)
        table.insert(try token(2), 20)
        #expect(table.count == 2)
        #expect(table[try token(1)] == 10)
        #expect(table.insert(try token(1), 11) == first)
        #expect(table.count == 2)
        #expect(table[try token(1)] == 11)
        #expect(table.remove(try token(3)) == nil)
        #expect(table.remove(try token(1))?.value == 11)
        #expect(table[try token(1)] == nil)
        #expect(table[try token(2)] == 20)
        #expect(table.remove(try token(2))?.value == 20)
        #expect(table.isEmpty)
    }

    @Test("swap-remove moves the last token into the freed slot and the index follows it")
    func swapRemove() throws {
        var table = TokenTable<Int>()
        for number in 0..<5 { table.insert(try token(number), number) }
        let removal = table.remove(try token(1))
        #expect(removal?.value == 1)
        #expect(removal?.moved?.token == (try token(4)))
        #expect(removal?.moved?.from == 4)
        #expect(removal?.moved?.to == 1)
        #expect(table.slot(of: try token(4)) == 1)
        #expect(table[slot: 1] == 4)
        #expect(table.remove(try token(4))?.moved?.to == 1)
        #expect(table.slot(of: try token(3)) == 1)
        #expect(table.remove(try token(2))?.moved == nil)
        #expect(Set(table.tokens) == [try token(0), try token(3)])
    }

    @Test("grows past many thousands of tokens of mixed lengths")
    func growth() throws {
        var table = TokenTable<Int>()
        for number in 0..<20_000 { table.insert(try token(number, count: number % 3 == 0 ? 40 : 32), number) }
        #expect(table.count == 20_000)
        for number in 0..<20_000 { #expect(table[try token(number, count: number % 3 == 0 ? 40 : 32)] == number) }
    }

    @Test("grows by a quarter at a time: little room held beyond its tokens")
    func growthSlack() throws {
        var table = TokenTable<Int>()
        var worst = 0.0
        for number in 0..<50_000 {
            table.insert(try token(number), number)
            if number >= 1_000 { worst = max(worst, Double(table.tokens.capacity) / Double(table.count)) }
        }
        // Doubling would reach 2; a quarter more at a time (and malloc's rounding) stays near 1.25.
        #expect(worst <= 1.3, "capacity up to \(worst) times the tokens")
    }

    @Test("insertIfAbsent adds once and keeps the first value; reserveCapacity keeps every lookup")
    func insertIfAbsentAndReserve() throws {
        var table = TokenTable<Int>()
        table.reserveCapacity(5_000)
        #expect(table.tokens.capacity >= 5_000)
        for number in 0..<5_000 { #expect(table.insertIfAbsent(try token(number), number)) }
        for number in 0..<5_000 where number % 7 == 0 { #expect(!table.insertIfAbsent(try token(number), -1)) }
        #expect(table.count == 5_000)
        for number in 0..<5_000 { #expect(table[try token(number)] == number) }
        table.reserveCapacity(40_000)
        for number in 0..<5_000 { #expect(table.slot(of: try token(number)) == number) }
        for number in 5_000..<40_000 { table.insertIfAbsent(try token(number), number) }
        #expect(table.count == 40_000)
        #expect(table[try token(39_999)] == 39_999)
    }

    @Test("random inserts, replacements and removals agree with a Dictionary", arguments: [7, 8, 9] as [UInt64])
    func randomized(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        var table = TokenTable<UInt64>()
        var model: [DeviceToken: UInt64] = [:]
        for step in 0..<30_000 {
            // A small key space so that collisions, replacements and removals are frequent.
            let number = Int(generator.next() % 3_000)
            let key = try token(number, count: number % 5 == 0 ? 33 : 32)
            let value = generator.next()
            if generator.next() % 3 == 0 {
                #expect(table.remove(key)?.value == model.removeValue(forKey: key))
            } else {
                table.insert(key, value)
                model[key] = value
            }
            if step % 1_000 == 0 {
                #expect(table.count == model.count)
                for (key, value) in model { #expect(table[key] == value) }
                for (slot, key) in table.tokens.enumerated() { #expect(table.slot(of: key) == slot) }
            }
        }
        #expect(Dictionary(uniqueKeysWithValues: zip(table.tokens, table.values)) == model)
    }
}
