import Hummingbird
@testable import LiveDispatchHTTP
import Testing

@Suite("Console assets")
struct ConsoleAssetsTests {
    @Test("the page, its script and style are served with their types, an ETag and a CSP without inline code")
    func served() throws {
        let paths = ConsoleAssets.assets.map(\.path)
        #expect(paths == ["/", "/console/console.css", "/console/console.js"])
        let page = try #require(ConsoleAssets.assets.first)
        let html = String(decoding: page.bytes, as: UTF8.self)
        #expect(html.contains(#"<script src="/console/console.js" defer></script>"#))
        #expect(!html.contains("<script>") && !html.contains(" style=") && !html.contains(" onclick="), "nothing inline for the CSP to refuse")
        let response = ConsoleAssets.response(page, ifNoneMatch: nil)
        #expect(response.status == .ok)
        #expect(response.headers[.contentType] == "text/html; charset=utf-8")
        #expect(response.headers[.cacheControl] == "no-cache")
        #expect(response.headers[.contentSecurityPolicy]?.contains("script-src 'self';") == true)
        #expect(response.headers[.contentSecurityPolicy]?.contains("unsafe-inline") == false)
        #expect(ConsoleAssets.response(page, ifNoneMatch: "\"other\", \(page.etag)").status == .notModified)
        #expect(ConsoleAssets.response(page, ifNoneMatch: "\"other\"").status == .ok)
        #expect(Set(ConsoleAssets.assets.map(\.etag)).count == 3)
    }
}
