import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

/// Compiles and evaluates one expression against an event.
func evaluate(_ text: String, event: JSONValue = [:], now: Double = 1_770_593_400, item: Value? = nil) throws -> Value {
    let compiled = try ExpressionCompiler(hasItem: item != nil).compile(text)
    var context = EvaluationContext(
        event: event, key: .string("match-42"), topic: "sports.scores", headers: ["trace": "abc"], now: now, recordTime: now - 60)
    if let item { context.item = item }
    return try compiled.evaluate(context)
}

/// The compile problem of an expression, or nil when it compiles.
func compileProblem(_ text: String) -> ExpressionErrorOrCompile? {
    do {
        _ = try ExpressionCompiler(hasItem: false).compile(text)
        return nil
    } catch {
        return error
    }
}

/// The run-time failure of an expression, or nil when it succeeds.
func failure(_ text: String, event: JSONValue = [:]) throws -> String? {
    let compiled = try ExpressionCompiler(hasItem: false).compile(text)
    let context = EvaluationContext(event: event, key: .null, topic: "t", headers: [:], now: 0, recordTime: 0)
    do {
        _ = try compiled.evaluate(context)
        return nil
    } catch {
        return error.message
    }
}

@Suite("Expression language")
struct ExpressionTests {
    let goal: JSONValue = [
        "type": "goal", "minute": 23, "score": ["home": 2, "away": 1], "odd key": "x", "items": [10, 20, 30],
        "scorer": "Ada", "ratio": 0.5,
    ]

    @Test("field paths, brackets, indexes, key, topic and headers")
    func paths() throws {
        #expect(try evaluate("event.score.home", event: goal) == .int(2))
        #expect(try evaluate("event[\"odd key\"]", event: goal) == .string("x"))
        #expect(try evaluate("event.items[1]", event: goal) == .int(20))
        #expect(try evaluate("key", event: goal) == .string("match-42"))
        #expect(try evaluate("topic") == .string("sports.scores"))
        #expect(try evaluate("headers.trace") == .string("abc"))
    }

    @Test("a missing field is null, all the way down; an index out of range is null")
    func missingIsNull() throws {
        #expect(try evaluate("event.nope", event: goal) == .null)
        #expect(try evaluate("event.nope.deeper.still", event: goal) == .null)
        #expect(try evaluate("event.items[7]", event: goal) == .null)
        #expect(try evaluate("event.nope ?? 5", event: goal) == .int(5))
        #expect(try evaluate("event.scorer ?? \"nobody\"", event: goal) == .string("Ada"))
    }

    @Test("CEL precedence: && over ||, arithmetic over comparison, ?: lowest")
    func precedence() throws {
        #expect(try evaluate("1 + 2 * 3") == .int(7))
        #expect(try evaluate("(1 + 2) * 3") == .int(9))
        #expect(try evaluate("true || false && false") == .bool(true))
        #expect(try evaluate("1 + 1 == 2 ? \"yes\" : \"no\"") == .string("yes"))
        #expect(try evaluate("event.nope ?? 1 + 1", event: goal) == .int(2))
        #expect(try evaluate("-event.minute", event: goal) == .int(-23))
        #expect(try evaluate("!(event.minute > 10)", event: goal) == .bool(false))
    }

    @Test("numbers: int stays int, mixing gives double, 1 == 1.0, integer division")
    func numbers() throws {
        #expect(try evaluate("7 / 2") == .int(3))
        #expect(try evaluate("7 % 4") == .int(3))
        #expect(try evaluate("7 / 2.0") == .double(3.5))
        #expect(try evaluate("1 == 1.0") == .bool(true))
        #expect(try evaluate("event.ratio * 4", event: goal) == .double(2))
    }

    @Test("in, has, comparisons of strings")
    func membership() throws {
        #expect(try evaluate("event.type in [\"goal\", \"own_goal\"]", event: goal) == .bool(true))
        #expect(try evaluate("20 in event.items", event: goal) == .bool(true))
        #expect(try evaluate("\"score\" in event", event: goal) == .bool(true))
        #expect(try evaluate("has(event.score.home)", event: goal) == .bool(true))
        #expect(try evaluate("has(event.score.penalties)", event: goal) == .bool(false))
        #expect(try evaluate("has(event.nope.deeper)", event: goal) == .bool(false))
        #expect(try evaluate("\"abc\" < \"abd\"") == .bool(true))
    }

    @Test("string functions, also called as methods")
    func strings() throws {
        #expect(try evaluate("lower(\"ÄBC\")") == .string("äbc"))
        #expect(try evaluate("upper(event.scorer)", event: goal) == .string("ADA"))
        #expect(try evaluate("len(\"Zoë🦉\")") == .int(4))
        #expect(try evaluate("len(event.items)", event: goal) == .int(3))
        #expect(try evaluate("contains(event.scorer, \"d\")", event: goal) == .bool(true))
        #expect(try evaluate("event.scorer.contains(\"z\")", event: goal) == .bool(false))
        #expect(try evaluate("starts_with(event.type, \"go\")", event: goal) == .bool(true))
        #expect(try evaluate("event.type.startsWith(\"own\")", event: goal) == .bool(false))
        #expect(try evaluate("\"a\" + 'b' + \"\\n\"") == .string("ab\n"))
    }

    @Test("conversions and math functions")
    func conversions() throws {
        #expect(try evaluate("int(\"42\")") == .int(42))
        #expect(try evaluate("int(2.9)") == .int(2))
        #expect(try evaluate("double(3)") == .double(3))
        #expect(try evaluate("string(2.5)") == .string("2.5"))
        #expect(try evaluate("string(3)") == .string("3"))
        #expect(try evaluate("bool(\"true\")") == .bool(true))
        #expect(try evaluate("round(2.5)") == .int(3))
        #expect(try evaluate("round(-2.5)") == .int(-3))
        #expect(try evaluate("min(3, 1, 2)") == .int(1))
        #expect(try evaluate("max(event.items)", event: goal) == .int(30))
        #expect(try evaluate("abs(-4.5)") == .double(4.5))
    }

    @Test("dates and durations: now(), date(), duration(), minutes_between, format_duration")
    func time() throws {
        let now = 1_770_593_400.0  // 2026-02-08T23:30:00Z
        #expect(try evaluate("now()", now: now) == .time(now))
        #expect(try evaluate("timestamp", now: now) == .time(now - 60))
        #expect(try evaluate("date(\"2026-02-08T23:45:00Z\")") == .time(now + 900))
        #expect(try evaluate("date(1770593400)") == .time(now))
        #expect(try evaluate("duration(\"1h30m\")") == .duration(5400))
        #expect(try evaluate("duration(\"250ms\")") == .duration(0.25))
        #expect(try evaluate("now() + duration(\"15m\")", now: now) == .time(now + 900))
        #expect(try evaluate("date(\"2026-02-08T23:45:00Z\") - now()", now: now) == .duration(900))
        #expect(try evaluate("minutes_between(now(), date(event.eta))", event: ["eta": "2026-02-08T23:44:31Z"], now: now) == .int(15))
        #expect(try evaluate("minutes_between(now(), \"2026-02-08T23:00:00Z\")", now: now) == .int(-30))
        #expect(try evaluate("format_duration(3900)") == .string("1h 05m"))
        #expect(try evaluate("format_duration(duration(\"12m30s\"))") == .string("12m 30s"))
        #expect(try evaluate("format_duration(45)") == .string("45s"))
        #expect(try evaluate("date(\"2026-02-08T23:45:00+01:00\") < now()", now: now) == .bool(true))
    }

    @Test("type errors at run time are results naming the types, never crashes")
    func runtimeErrors() throws {
        #expect(try failure("event.a + 1", event: ["a": "x"]) == "'+' cannot be applied to a string and an int")
        #expect(try failure("event.a > 3", event: [:]) == "'>' cannot compare null with an int")
        #expect(try failure("1 / event.zero", event: ["zero": 0]) == "division by zero")
        #expect(try failure("event.big * 2", event: ["big": .integer(Int64.max)]) == "integer overflow in '*'")
        #expect(try failure("event.a.b", event: ["a": "text"]) == "cannot read field 'b' of a string")
        #expect(try failure("int(event.a)", event: ["a": "12x"]) == "int() cannot convert \"12x\"")
        #expect(try failure("date(event.a)", event: ["a": "tomorrow"]) == "\"tomorrow\" is not a date, expected ISO-8601 such as 2026-02-08T23:30:00Z")
        #expect(try failure("event.a && true", event: ["a": 1]) == "'&&' needs bools, got an int on the left")
    }

    @Test("short-circuit: the right side of && and || is not evaluated when decided")
    func shortCircuit() throws {
        #expect(try evaluate("has(event.a) && event.a.b > 1", event: [:]) == .bool(false))
        #expect(try evaluate("true || 1 / event.zero == 1", event: ["zero": 0]) == .bool(true))
    }

    @Test("type errors known before any event are compile errors at the right offset")
    func compileErrors() {
        #expect(compileProblem("\"a\" - 1")?.message == "'-' cannot be applied to a string and an int")
        #expect(compileProblem("event.x == \"a\" && 1 + \"b\" == 2")?.offset == 18)
        #expect(compileProblem("\"a\" == 1")?.message == "'==' compares a string with an int, which never match")
        #expect(compileProblem("foo(1)")?.message == "unknown function 'foo'")
        #expect(compileProblem("len(1, 2)")?.message == "len() takes 1 argument, got 2")
        #expect(compileProblem("lower(3)")?.message == "lower() cannot take an int")
        #expect(compileProblem("duration(\"soon\")")?.offset == 9)
        #expect(compileProblem("1 < 2 < 3")?.message == "comparisons cannot be chained")
        #expect(compileProblem("event.a +")?.message == "unexpected end of the expression")
        #expect(compileProblem("(1 + 2")?.expected == "')'")
        #expect(compileProblem("'open")?.message == "unterminated string")
        #expect(compileProblem("99999999999999999999")?.message == "integer 99999999999999999999 is out of range")
        #expect(compileProblem("event.a * 0.30000000000000004441")?.message == "number 0.30000000000000004441 would be rounded by a 64-bit double")
        #expect(compileProblem("event.a * 0.30000000000000004441")?.offset == 10)
        #expect(compileProblem("event.a * 0.25") == nil, "a number a double holds exactly is taken")
        #expect(compileProblem("item")?.message == "unknown name 'item' ('item' exists only in rules with for_each)")
        #expect(compileProblem("has(event)")?.message == "has() needs a field selection")
        #expect(compileProblem("event.a + 1 / 0")?.message == "division by zero")
        #expect(compileProblem("event.a + 1 / 0")?.offset == 10)
        #expect(compileProblem("int(\"twelve\")")?.message == "int() cannot convert \"twelve\"")
    }

    @Test("nesting is bounded")
    func nestingBounded() {
        let deep = String(repeating: "(", count: 200) + "1" + String(repeating: ")", count: 200)
        #expect(compileProblem(deep)?.message == "the expression is nested too deeply")
    }

    @Test("for_each elements are visible as item and index")
    func item() throws {
        #expect(try evaluate("item.name + \"!\"", item: .map(["name": "Ada"])) == .string("Ada!"))
    }
}
