import Foundation

/// The matches of the benchmarks that run workers as processes: every row
/// of `bench faults` runs one (who gets what, and what each token must end
/// at); `bench scale` and `bench soak` name their matches and tokens by it.
public struct FaultScenario: Sendable {
    public var activities: Int
    public var tokensPerActivity: Int
    public var bursts: Int
    public var goalsPerBurst: Int

    public init(activities: Int, tokensPerActivity: Int, bursts: Int, goalsPerBurst: Int) {
        self.activities = activities
        self.tokensPerActivity = tokensPerActivity
        self.bursts = bursts
        self.goalsPerBurst = goalsPerBurst
    }

    public var finalScore: Int { bursts * goalsPerBurst }

    public static func matchID(_ activity: Int) -> String { "f-\(activity)" }

    /// A 32-byte token that tells its activity and index.
    public static func token(activity: Int, index: Int) -> String {
        String(format: "%08x%08x", activity, index) + String(repeating: "fb", count: 24)
    }

    public var tokens: [(activity: Int, token: String)] {
        (0..<activities).flatMap { activity in (0..<tokensPerActivity).map { (activity, Self.token(activity: activity, index: $0)) } }
    }

    /// Every token ends with its match's end push carrying the final score.
    public var expected: [String: DeliveryAudit.State] {
        Dictionary(uniqueKeysWithValues: tokens.map { ($0.token, DeliveryAudit.State(version: Int64(finalScore), ended: true)) })
    }

    public static func goal(_ activity: Int, score: Int) -> String {
        #"{"type":"goal","match_id":"\#(matchID(activity))","minute":\#(score),"scoring_team":"Owls","scorer":"Ada","score":{"home":\#(score),"away":0}}"#
    }

    public static func finalWhistle(_ activity: Int, score: Int) -> String {
        #"{"type":"final_whistle","match_id":"\#(matchID(activity))","score":{"home":\#(score),"away":0}}"#
    }

    /// Records no worker can use, on the same keys as good ones: not JSON,
    /// not UTF-8, not an object, a rule's type error, and a command whose
    /// timestamp is out of range.
    public static func poison(_ activity: Int, commandsTopic: String) -> [(topic: String, value: [UInt8])] {
        [
            ("sports.scores", Array(#"{"type":"goal","match_id":"#.utf8)),
            ("sports.scores", [0xFF, 0xFE, 0x7B, 0x00, 0xC3]),
            ("sports.scores", Array("[1,2,3]".utf8)),
            ("sports.scores", Array(#"{"type":"goal","match_id":"\#(matchID(activity))","score":{"home":"many","away":0}}"#.utf8)),
            (commandsTopic, Array(#"{"activity_id":"match-\#(matchID(activity))","event":"update","content_state":{"teamOneScore":0},"timestamp":1e300}"#.utf8)),
        ]
    }
}
