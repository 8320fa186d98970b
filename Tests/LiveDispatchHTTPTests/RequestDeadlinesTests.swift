@testable import LiveDispatchHTTP
import Testing

@Suite("Request deadlines")
struct RequestDeadlinesTests {
    let start = ContinuousClock.now

    func machine() -> RequestDeadlines {
        RequestDeadlines(headerTimeout: .seconds(10), requestTimeout: .seconds(30), openedAt: start)
    }

    @Test("a connection that sends no head within the header timeout is closed")
    func slowHead() {
        var deadlines = machine()
        #expect(deadlines.initialAction == .arm(start + .seconds(10)))
        #expect(deadlines.timerFired(at: start + .seconds(10)) == .close)
        #expect(deadlines.phase == .closed)
        #expect(deadlines.timerFired(at: start + .seconds(11)) == .none)
    }

    @Test("an early timer re-arms for the same deadline")
    func earlyTimer() {
        var deadlines = machine()
        #expect(deadlines.timerFired(at: start + .seconds(9)) == .arm(start + .seconds(10)))
    }

    @Test("a head moves the deadline to the body's; the request's end stops it until the response ends")
    func requestCycle() {
        var deadlines = machine()
        #expect(deadlines.headReceived(at: start + .seconds(1)) == .arm(start + .seconds(31)))
        #expect(deadlines.timerFired(at: start + .seconds(31)) == .close)

        var kept = machine()
        _ = kept.headReceived(at: start + .seconds(1))
        #expect(kept.requestEnded() == .cancelTimer)
        // A slow handler is not the client's fault: no deadline while responding.
        #expect(kept.timerFired(at: start + .seconds(100)) == .none)
        #expect(kept.responseEnded(at: start + .seconds(100)) == .arm(start + .seconds(110)))
        #expect(kept.timerFired(at: start + .seconds(110)) == .close)
    }

    @Test("a pipelined head keeps its own deadline when the previous response ends")
    func pipelined() {
        var deadlines = machine()
        _ = deadlines.headReceived(at: start)
        _ = deadlines.requestEnded()
        #expect(deadlines.headReceived(at: start + .seconds(1)) == .arm(start + .seconds(31)))
        #expect(deadlines.responseEnded(at: start + .seconds(2)) == .none)
        #expect(deadlines.phase == .readingBody(deadline: start + .seconds(31)))
    }

    @Test("closing cancels the timer once")
    func closed() {
        var deadlines = machine()
        #expect(deadlines.connectionClosed() == .cancelTimer)
        #expect(deadlines.connectionClosed() == .none)
        #expect(deadlines.headReceived(at: start) == .none)
    }
}

@Suite("Request deadlines: Connection: close")
struct RequestDeadlinesCloseTests {
    @Test("a response that said Connection: close closes the connection once written, body unread or not")
    func closeAfterResponse() {
        let start = ContinuousClock.now
        var deadlines = RequestDeadlines(headerTimeout: .seconds(10), requestTimeout: .seconds(30), openedAt: start)
        #expect(deadlines.headReceived(at: start) == .arm(start + .seconds(30)))
        // Refused from its head: the body is still unread when the answer ends.
        #expect(deadlines.responseEnded(at: start, keepAlive: false) == .close)
        #expect(deadlines.phase == .closed)
        #expect(deadlines.timerFired(at: start + .seconds(31)) == .none)
        var kept = RequestDeadlines(headerTimeout: .seconds(10), requestTimeout: .seconds(30), openedAt: start)
        _ = kept.headReceived(at: start)
        _ = kept.requestEnded()
        #expect(kept.responseEnded(at: start) == .arm(start + .seconds(10)))
    }
}
