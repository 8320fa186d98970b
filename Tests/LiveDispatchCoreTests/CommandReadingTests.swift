@testable import LiveDispatchCore
import Testing

/// A command's bytes read member by member (the router's commands) and
/// through the JSON tree (everything else) give the same command or the
/// same error.
@Suite("Reading commands directly")
struct CommandReadingTests {
    /// The full reader alone: the JSON tree, then the fields.
    static func throughTheTree(_ bytes: [UInt8], apps: AppDirectory) -> Result<ActivityCommand, FieldError> {
        do {
            return .success(try ActivityCommand(json: try FieldReader.parse(bytes), apps: apps))
        } catch {
            return .failure(error)
        }
    }

    static func throughBytes(_ bytes: [UInt8], apps: AppDirectory) -> Result<ActivityCommand, FieldError> {
        do {
            return .success(try ActivityCommand(bytes: bytes, apps: apps))
        } catch {
            return .failure(error)
        }
    }

    @Test("the commands the router writes are read without the tree, as the tree reads them")
    func routedCommandsAreReadDirectly() throws {
        let match = try ActivityID("match-7")
        let source = CommandSource(topic: "sports.scores", partition: 3, offset: 1_234, rule: "goal-scored")
        let commands = [
            ActivityCommand(activityID: match),
            ActivityCommand(
                activityID: match, contentState: ["home": 2, "scorer": "Ada \"the\" first é", "minute": 89.5, "cards": [1, nil, true]],
                timestamp: UnixTime(seconds: 1_764_010_000.25), priority: try PushPriority(10), staleDate: UnixTime(seconds: 1_764_013_600),
                relevanceScore: 100, alert: ActivityAlert(title: "Goal", body: "Owls 2–0", sound: "default"), source: source
            ).routed,
            ActivityCommand(id: "backend-1", activityID: match, event: .end, dismissalDate: UnixTime(seconds: 0), source: CommandSource(topic: "t", partition: 0, offset: 0)),
            ActivityCommand(activityID: match, contentState: [:], replaceState: true, priority: try PushPriority(5), alert: ActivityAlert(title: "t", body: "b")),
        ]
        for command in commands {
            let bytes = command.serialized()
            let direct = bytes.withUnsafeBufferPointer { ActivityCommand.readDirectly($0) }
            #expect(direct == command, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(try ActivityCommand(bytes: bytes) == command)
        }
    }

    @Test("a start, another member, a null, a date as text and every error go through the tree")
    func othersGoThroughTheTree() throws {
        let texts = [
            #"{"activity_id":"m","event":"start","alert":{"title":"a","body":"b"},"attributes_type":"T","attributes":{}}"#,
            #"{"activity_id":"m","app":"sports"}"#,
            #"{"activity_id":"m","id":null}"#,
            #"{"activity_id":"m","timestamp":"2025-11-24T18:00:00Z"}"#,
            #"{"activity_id":"m","activity_id":"n"}"#,
            #"{"activity_id":"m","priority":7}"#,
            #"{"activity_id":"m","priority":10.0}"#,
            #"{"activity_id":"m"} x"#,
            #"{"activity\u005fid":"m"}"#,
            #"{"activity_id":"m","source":{"topic":"t","partition":-1,"offset":0}}"#,
            #"{"activity_id":"m","replace_state":true}"#,
            #"{"activity_id":"m","content_state":{"a":1,"a":2}}"#,
            #"{"event":"update"}"#,
        ]
        for text in texts {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBufferPointer { ActivityCommand.readDirectly($0) } == nil, "\(text)")
            #expect(Self.throughBytes(bytes, apps: .unchecked) == Self.throughTheTree(bytes, apps: .unchecked), "\(text)")
        }
    }

    @Test("random commands and their mutations: the same command or the same error both ways")
    func randomCommandsAgree() throws {
        var generator = SplitMix64(seed: 20_261_126)
        // Two apps: a command naming none is fine unless it is a start.
        let apps = AppDirectory([.init(name: "sports"), .init(name: "news")])
        var direct = 0
        var throughTree = 0
        for _ in 0..<6_000 {
            var bytes = Array(Self.randomCommand(&generator).utf8)
            if Int.random(in: 0..<4, using: &generator) == 0 { Self.mutate(&bytes, &generator) }
            let expected = Self.throughTheTree(bytes, apps: apps)
            let read = bytes.withUnsafeBufferPointer { ActivityCommand.readDirectly($0) }
            if let read {
                direct += 1
                #expect(expected == .success(read), "\(String(decoding: bytes, as: UTF8.self))")
            } else {
                throughTree += 1
            }
            #expect(Self.throughBytes(bytes, apps: apps) == expected, "\(String(decoding: bytes, as: UTF8.self))")
        }
        // Both ways are exercised.
        #expect(direct > 1_000)
        #expect(throughTree > 1_000)
    }

    /// A command's text with members in random order and spacing, mostly
    /// valid, sometimes with a member or a value the direct reading leaves
    /// to the tree, or an invalid one.
    static func randomCommand(_ generator: inout SplitMix64) -> String {
        func pick<T>(_ options: [T]) -> T { options[Int.random(in: 0..<options.count, using: &generator)] }
        func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &generator) < percent }
        let space = { (generator: inout SplitMix64) -> String in
            ["", "", "", " ", "\n ", "\t"][Int.random(in: 0..<6, using: &generator)]
        }
        // Mostly a valid value, sometimes one of the others.
        func value(_ valid: [String], _ others: [String]) -> String { chance(88) ? pick(valid) : pick(others) }
        var members: [(String, String)] = []
        if chance(97) { members.append(("activity_id", value([#""match-1""#, #""m é""#, #""a\"b""#, #""\ud83d\ude00""#], [#""""#, "7"]))) }
        if chance(50) { members.append(("event", value([#""update""#, #""end""#], [#""start""#, #""pause""#, "1"]))) }
        if chance(50) {
            members.append(("id", value([#""sports/1@2/goal""#, #""x""#], [#""""#, "\"" + String(repeating: "x", count: 201) + "\"", "null"])))
        }
        if chance(70) {
            members.append(("content_state", value(
                [#"{"home":1,"away":0}"#, "{}", #"{"a":{"b":[1,2.5,-3e2,null,true]}}"#, #"{"s":"\u00e9\n"}"#],
                [#"{"a":1,"a":2}"#, "[1]", #""text""#, "{" + String(repeating: #""a":{"#, count: 70) + String(repeating: "}", count: 71)])))
        }
        if chance(10) { members.append(("replace_state", value(["true", "false"], ["1", "null"]))) }
        for date in ["timestamp", "stale_date", "dismissal_date"] where chance(30) {
            members.append((date, value(["1764010000", "1764010000.25", "0", "1e3"], ["-1", "253402300800", #""2025-11-24T18:00:00Z""#, #""soon""#, "null"])))
        }
        if chance(40) { members.append(("priority", value(["10", "5", "1"], ["7", "10.0", "-5", "99999999999999999999", #""10""#]))) }
        if chance(20) { members.append(("relevance_score", value(["100", "0.5", "-2"], ["1e400", #""high""#]))) }
        if chance(40) {
            members.append(("alert", value(
                [#"{"title":"Goal","body":"Owls score","sound":"default"}"#, #"{"body":"b","title":"t"}"#],
                [#"{"title":"t"}"#, #"{"title":"t","body":"b","extra":1}"#, #"{"title":"t","body":"b","sound":null}"#, "{}", #""alert""#])))
        }
        if chance(50) {
            members.append(("source", value(
                [#"{"offset":5,"partition":1,"rule":"goal","topic":"sports"}"#, #"{"topic":"t","partition":0,"offset":0}"#],
                [
                    #"{"topic":"t","partition":2147483648,"offset":0}"#, #"{"topic":"t","partition":1,"offset":-1}"#,
                    #"{"topic":"t","partition":1.0,"offset":3}"#, #"{"topic":"t","offset":3}"#, #"{"topic":"t","partition":1,"offset":3,"x":0}"#,
                ])))
        }
        if chance(5) { members.append(("app", #""sports""#)) }
        if chance(5) { members.append(("unknown_member", "1")) }
        if chance(3), let first = members.first { members.append(first) }
        members.shuffle(using: &generator)
        let body = members.map { name, value in
            space(&generator) + "\"\(name)\"" + space(&generator) + ":" + space(&generator) + value + space(&generator)
        }
        return space(&generator) + "{" + body.joined(separator: ",") + "}" + space(&generator)
    }

    /// Deletes, inserts or replaces a byte.
    static func mutate(_ bytes: inout [UInt8], _ generator: inout SplitMix64) {
        guard !bytes.isEmpty else { return }
        let position = Int.random(in: 0..<bytes.count, using: &generator)
        let structural = Array("{}[]\":,0-.e\\ nt".utf8) + [0x00, 0x1F, 0x80, 0xFF]
        let byte = structural[Int.random(in: 0..<structural.count, using: &generator)]
        switch Int.random(in: 0..<3, using: &generator) {
        case 0: bytes.remove(at: position)
        case 1: bytes.insert(byte, at: position)
        default: bytes[position] = byte
        }
    }
}
