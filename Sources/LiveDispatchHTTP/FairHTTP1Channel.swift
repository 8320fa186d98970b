import HummingbirdCore
import Logging
import NIOCore

/// The main listener's HTTP/1 child channel: a connection from an address
/// that already holds its share (``ConnectionLedger/hasRoom(for:)``) is
/// closed before any pipeline or task is made for it, so that a client
/// reopening connections as fast as they close costs the server an accept
/// and a close. Everything else is Hummingbird's ``HTTP1Channel``.
struct FairHTTP1Channel: ServerChildChannel {
    /// Why a connection was closed unread.
    struct AddressFull: Error, CustomStringConvertible {
        var address: String
        var description: String { "\(address) holds its share of connections (http.max_connections_per_address)" }
    }

    let inner: HTTP1Channel
    let ledger: ConnectionLedger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        let address = ConnectionLedger.address(of: channel)
        guard ledger.hasRoom(for: address) else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(AddressFull(address: address))
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
