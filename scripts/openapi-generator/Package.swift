// swift-tools-version:6.1
// A separate package that only builds swift-openapi-generator's command-line
// tool, so the main package never builds the generator (or swift-syntax):
// `scripts/generate-openapi` runs it and the generated sources are committed.
import PackageDescription

let package = Package(
    name: "OpenAPIGeneratorTool",
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3"),
    ]
)
