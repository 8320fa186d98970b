import LiveDispatchCore

/// The JSON Schema (draft 2020-12) of a rule file, for editors with a YAML
/// language server: `# yaml-language-server: $schema=rules.schema.json`.
public enum RuleFileSchema {
    public static var json: JSONValue {
        let expression: JSONValue = [
            "description": "An expression (CEL syntax): event.x, key, topic, headers, timestamp, now(), has(), ??, functions.",
            "type": ["string", "number", "boolean", "null"],
        ]
        let template: JSONValue = ["type": "string", "description": "Text with {{ expression }} parts."]
        let fieldType: JSONValue = [
            "description": "int, double, string, bool, date, enum(a, b), [type], or a mapping for an object; ? marks optional.",
            "anyOf": [
                ["type": "string", "pattern": "^(int|double|string|bool|date|enum\\(.+\\)|\\[.+\\])\\??$"],
                ["type": "array", "minItems": 1, "maxItems": 1],
                ["type": "object"],
            ],
        ]
        let schemaObject: JSONValue = ["type": "object", "additionalProperties": ["$ref": "#/$defs/fieldType"]]
        let assignments: JSONValue = [
            "type": "object", "description": "content_state field → expression (or a mapping for an object field).",
            "additionalProperties": ["anyOf": [["$ref": "#/$defs/expression"], ["type": "object"]]],
        ]
        let rule: JSONValue = [
            "type": "object",
            "required": ["name", "topic", "activity_id", "activity_type"],
            "additionalProperties": false,
            "properties": [
                "name": ["type": "string", "minLength": 1, "description": "Unique rule name."],
                "description": ["type": "string"],
                "topic": ["description": "Kafka topic or topics the rule reads.", "anyOf": [["type": "string"], ["type": "array", "items": ["type": "string"]]]],
                "when": ["$ref": "#/$defs/expression"],
                "activity_id": ["$ref": "#/$defs/template"],
                "activity_type": ["type": "string", "description": "A name under activity_types."],
                "event": ["enum": ["update", "end", "start"], "default": "update"],
                "set": ["$ref": "#/$defs/assignments"],
                "unset": ["anyOf": [["type": "string"], ["type": "array", "items": ["type": "string"]]]],
                "replace_state": ["type": "boolean", "default": false],
                "priority": ["anyOf": [["enum": [5, 10]], ["type": "string"]]],
                "alert": [
                    "type": "object", "required": ["title", "body"], "additionalProperties": false,
                    "properties": ["title": ["$ref": "#/$defs/template"], "body": ["$ref": "#/$defs/template"], "sound": ["$ref": "#/$defs/template"]],
                ],
                "stale_after": ["description": "A duration (15m, 1h30m) after the timestamp, or an expression.", "$ref": "#/$defs/expression"],
                "stale_date": ["$ref": "#/$defs/expression"],
                "dismiss_after": ["description": "A duration (15m) after the timestamp, or an expression.", "$ref": "#/$defs/expression"],
                "dismissal_date": ["$ref": "#/$defs/expression"],
                "relevance_score": ["$ref": "#/$defs/expression"],
                "timestamp": ["$ref": "#/$defs/expression"],
                "for_each": ["description": "A list expression; one command per element, seen as item and index.", "$ref": "#/$defs/expression"],
                "attributes": ["$ref": "#/$defs/assignments"],
                "audiences": [
                    "description": "For a start: audience keys (templates) whose push-to-start tokens are sent the start.",
                    "type": "array", "minItems": 1, "maxItems": 100, "items": ["$ref": "#/$defs/template"],
                ],
                "app": [
                    "description": "The app (of the worker's apps:) the activities belong to; needed on a start when there are several.",
                    "type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$",
                ],
                "broadcast": ["type": "boolean", "description": "For a start: broadcast the activity through a channel the worker creates."],
                "storage_policy": ["enum": ["no-storage", "most-recent", 0, 1], "description": "With broadcast: the channel's message storage policy (default most-recent)."],
            ],
        ]
        return [
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://livedispatch.dev/schemas/rules-v1.json",
            "title": "LiveDispatch rule file",
            "type": "object",
            "required": ["version"],
            "additionalProperties": false,
            "properties": [
                "version": ["const": 1],
                "activity_types": [
                    "type": "object",
                    "additionalProperties": [
                        "type": "object", "required": ["content_state"], "additionalProperties": false,
                        "properties": ["content_state": ["$ref": "#/$defs/schemaObject"], "attributes": ["$ref": "#/$defs/schemaObject"]],
                    ],
                ],
                "rules": ["type": "array", "items": ["$ref": "#/$defs/rule"]],
            ],
            "$defs": [
                "expression": expression, "template": template, "fieldType": fieldType, "schemaObject": schemaObject,
                "assignments": assignments, "rule": rule,
            ],
        ]
    }
}
