import Foundation
import Testing

@Suite("livedispatch payload as a process")
struct PayloadCommandTests {
    @Test("prints the HTTP/2 request for a command merged into a content-state")
    func updateRequest() throws {
        let directory = try TestPaths.temporaryDirectory()
        let state = try writeFile(#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "1st"}"#, "state.json", in: directory)
        let command = try writeFile(#"""
            {"activity_id": "match-42", "content_state": {"teamOneScore": 2}, "timestamp": "2025-11-24T18:00:00Z",
             "priority": 5, "alert": {"title": "Goal!", "body": "Owls 2–0", "sound": "default"}}
            """#, "command.json", in: directory)
        let result = try runProcess([
            "payload", "--state", state, "--command", command, "--token", "A1B2C3D4", "--bundle-id", "com.example.owls",
            "--environment", "sandbox", "--apns-id", "0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40", "--now", "1764007300",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == """
            :method: POST
            :scheme: https
            :path: /3/device/a1b2c3d4
            :authority: api.sandbox.push.apple.com
            apns-push-type: liveactivity
            apns-topic: com.example.owls.push-type.liveactivity
            apns-priority: 5
            apns-expiration: 1764036000
            apns-id: 0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40
            content-type: application/json
            content-length: 180

            {"aps":{"alert":{"body":"Owls 2–0","sound":"default","title":"Goal!"},"content-state":{"period":"1st","teamOneScore":2,"teamTwoScore":0},"event":"update","timestamp":1764007200}}

            """)
    }

    @Test("an end applied to a state snapshot carries the dismissal date")
    func endOnSnapshot() throws {
        let directory = try TestPaths.temporaryDirectory()
        let state = try writeFile(#"""
            {"activity_id": "match-42", "content_state": {"teamOneScore": 3, "teamTwoScore": 1}, "version": 12,
             "timestamp": 1764009000, "created_at": 1764000000, "last_offset": 77}
            """#, "state.json", in: directory)
        let command = try writeFile(#"""
            {"activity_id": "match-42", "event": "end", "content_state": {"period": "FT"}, "timestamp": 1764008000,
             "dismissal_date": 1764010000}
            """#, "end.json", in: directory)
        let result = try runProcess(["payload", "--state", state, "--command", command, "--now", "1764009100"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasSuffix(#"{"aps":{"content-state":{"period":"FT","teamOneScore":3,"teamTwoScore":1},"dismissal-date":1764010000,"event":"end","timestamp":1764009000}}"# + "\n"))
        #expect(result.standardOutput.contains(":path: /3/device/{device token}\n"))
    }

    @Test(
        "bad input names the file and the problem and exits 1",
        arguments: [
            (#"{"activity_id": "match-42", "content_state": {"a": 1}"#, "command.json:1:54: unexpected end of input, expected ',' or '}' in an object"),
            (#"{"activity_id": "match-42", "event": "finish"}"#, #"command.json: field 'event': "finish" is not an event (expected update, end or start)"#),
            (#"{"content_state": {}}"#, "command.json: field 'activity_id': is required"),
            (#"{"activity_id":"a","content_state":{"x":1},"timestamp":1e300}"#,
             "command.json: field 'timestamp': expected a date as Unix seconds from 0 to 253402300799 (year 9999), got 1e+300"),
            (#"{"activity_id":"a","content_state":{"x":1},"dismissal_date":9.3e18}"#,
             "command.json: field 'dismissal_date': expected a date as Unix seconds from 0 to 253402300799 (year 9999), got 9.3e+18"),
        ])
    func badCommand(json: String, message: String) throws {
        let directory = try TestPaths.temporaryDirectory()
        let command = try writeFile(json, "command.json", in: directory)
        let result = try runProcess(["payload", "--command", command], currentDirectory: directory)
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError == "error: \(command.replacingOccurrences(of: "command.json", with: ""))\(message)\n")
    }

    @Test("a payload over 4096 bytes is refused with its size")
    func oversize() throws {
        let directory = try TestPaths.temporaryDirectory()
        let big = String(repeating: "x", count: 5000)
        let command = try writeFile(#"{"activity_id": "match-42", "content_state": {"note": "\#(big)"}}"#, "command.json", in: directory)
        let result = try runProcess(["payload", "--command", command, "--now", "1764000000"])
        #expect(result.status == 1)
        #expect(result.standardError.contains("payload for activity match-42 is 5077 bytes, over the APNs limit of 4096"))
    }

    @Test("a missing file is reported by name")
    func missingFile() throws {
        let result = try runProcess(["payload", "--command", "/nonexistent/command.json"])
        #expect(result.status == 1)
        #expect(result.standardError.hasPrefix("error: /nonexistent/command.json: cannot be read"))
    }
}
