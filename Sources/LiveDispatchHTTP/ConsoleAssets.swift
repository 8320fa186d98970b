import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The web console: static HTML, CSS and JavaScript from `Console/`,
/// compiled into the binary by SwiftPM (`embedInCode`), served at `/` with
/// their content types, an ETag (`If-None-Match` answers 304), `no-cache`
/// (revalidated on each load, so an upgraded worker is seen at once) and a
/// Content-Security-Policy that allows only the console's own files and
/// requests to this server: no inline script or style, no other origin.
enum ConsoleAssets {
    struct Asset: Sendable {
        let path: String
        let contentType: String
        let bytes: [UInt8]
        let etag: String

        init(path: String, contentType: String, bytes: [UInt8]) {
            self.path = path
            self.contentType = contentType
            self.bytes = bytes
            let digest = SHA256.hash(data: bytes).prefix(12).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            etag = "\"\(digest)\""
        }
    }

    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static let assets: [Asset] = [
        Asset(path: "/", contentType: "text/html; charset=utf-8", bytes: PackageResources.index_html),
        Asset(path: "/console/console.css", contentType: "text/css; charset=utf-8", bytes: PackageResources.console_css),
        Asset(path: "/console/console.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.console_js),
    ]

    static func addRoutes(to routes: GuardedRouter) {
        for asset in assets {
            routes.open(.get, asset.path) { request, _ in response(asset, ifNoneMatch: request.headers[.ifNoneMatch]) }
        }
        // Browsers ask for an icon; the console has none.
        routes.open(.get, "/favicon.ico") { _, _ in Response(status: .noContent) }
    }

    static func response(_ asset: Asset, ifNoneMatch: String?) -> Response {
        var headers: HTTPFields = [
            .contentType: asset.contentType, .cacheControl: "no-cache", .eTag: asset.etag,
            .contentSecurityPolicy: contentSecurityPolicy, .xContentTypeOptions: "nosniff",
        ]
        let tags = ifNoneMatch?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        if tags.contains(asset.etag) || tags.contains("*") {
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }
}
