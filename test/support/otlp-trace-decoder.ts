/**
 * Decodes an OTLP ExportTraceServiceRequest, in either of its OTLP/HTTP encodings
 * (binary protobuf or OTLP JSON), into one flat, encoding-independent list of spans,
 * so a test can assert the same thing whichever exporter sent it.
 *
 * Field numbers follow the OTLP trace, common and resource protos
 * (opentelemetry/proto/{collector/trace,trace,common,resource}/v1).
 */
import { ProtobufDecodeError, ProtobufReader } from "./otlp-protobuf-reader.js";

/** An OTLP AnyValue: int64 becomes a number when it is a safe integer, else a bigint; kvlists become records. */
export type OtlpValue =
  | string
  | number
  | boolean
  | bigint
  | Uint8Array
  | null
  | OtlpValue[]
  | { [key: string]: OtlpValue };

export type OtlpAttributes = Record<string, OtlpValue>;

/** One span as a collector received it, with its resource and scope folded in. */
export interface ReceivedSpan {
  /** 32 lowercase hex characters. */
  traceId: string;
  /** 16 lowercase hex characters. */
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  /** OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: OtlpAttributes;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. An empty message is left out. */
  status: { code: number; message?: string };
  events: { name: string; timeUnixNano: bigint; attributes: OtlpAttributes }[];
  links: { traceId: string; spanId: string; attributes: OtlpAttributes }[];
  /** Resource attributes, e.g. service.name. */
  resource: OtlpAttributes;
  scope: { name: string; version?: string };
}

/** Thrown when a body parses but is not a valid ExportTraceServiceRequest (bad ids, wrong types). */
export class OtlpDecodeError extends Error {
  override readonly name = "OtlpDecodeError";
}

type SpanWithoutContext = Omit<ReceivedSpan, "resource" | "scope">;

const SPAN_KIND_NAMES = [
  "SPAN_KIND_UNSPECIFIED",
  "SPAN_KIND_INTERNAL",
  "SPAN_KIND_SERVER",
  "SPAN_KIND_CLIENT",
  "SPAN_KIND_PRODUCER",
  "SPAN_KIND_CONSUMER",
];
const STATUS_CODE_NAMES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];

// ---------------------------------------------------------------------------
// Binary protobuf

/** Decodes a binary protobuf ExportTraceServiceRequest. */
export function decodeProtobufTraceRequest(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  const r = new ProtobufReader(body);
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    if (f === 1) spans.push(...readResourceSpans(r.message()));
    else r.skip();
  }
  return spans;
}

function readResourceSpans(r: ProtobufReader): ReceivedSpan[] {
  let resource: OtlpAttributes = {};
  const scoped: { scope: ReceivedSpan["scope"]; spans: SpanWithoutContext[] }[] = [];
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        resource = readResource(r.message());
        break;
      case 2:
        scoped.push(readScopeSpans(r.message()));
        break;
      default:
        r.skip();
    }
  }
  // Fields may arrive in any order, so the resource is attached only once the message is read.
  return scoped.flatMap(({ scope, spans }) => spans.map((span) => ({ ...span, resource, scope })));
}

function readResource(r: ProtobufReader): OtlpAttributes {
  const attributes: OtlpAttributes = {};
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    if (f === 1) readKeyValueInto(r.message(), attributes);
    else r.skip();
  }
  return attributes;
}

function readScopeSpans(r: ProtobufReader): { scope: ReceivedSpan["scope"]; spans: SpanWithoutContext[] } {
  let scope: ReceivedSpan["scope"] = { name: "" };
  const spans: SpanWithoutContext[] = [];
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        scope = readScope(r.message());
        break;
      case 2:
        spans.push(readSpan(r.message()));
        break;
      default:
        r.skip();
    }
  }
  return { scope, spans };
}

function readScope(r: ProtobufReader): ReceivedSpan["scope"] {
  let name = "";
  let version = "";
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        name = r.string();
        break;
      case 2:
        version = r.string();
        break;
      default:
        r.skip();
    }
  }
  return version === "" ? { name } : { name, version };
}

function readSpan(r: ProtobufReader): SpanWithoutContext {
  let traceId: Uint8Array = new Uint8Array();
  let spanId: Uint8Array = new Uint8Array();
  let parentSpanId: Uint8Array = new Uint8Array();
  let traceState = "";
  let name = "";
  let kind = 0;
  let startTimeUnixNano = 0n;
  let endTimeUnixNano = 0n;
  const attributes: OtlpAttributes = {};
  const events: ReceivedSpan["events"] = [];
  const links: ReceivedSpan["links"] = [];
  let status: ReceivedSpan["status"] = { code: 0 };
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        traceId = r.bytes();
        break;
      case 2:
        spanId = r.bytes();
        break;
      case 3:
        traceState = r.string();
        break;
      case 4:
        parentSpanId = r.bytes();
        break;
      case 5:
        name = r.string();
        break;
      case 6:
        kind = r.uint32();
        break;
      case 7:
        startTimeUnixNano = r.fixed64();
        break;
      case 8:
        endTimeUnixNano = r.fixed64();
        break;
      case 9:
        readKeyValueInto(r.message(), attributes);
        break;
      case 11:
        events.push(readEvent(r.message()));
        break;
      case 13:
        links.push(readLink(r.message()));
        break;
      case 15:
        status = readStatus(r.message());
        break;
      default:
        r.skip();
    }
  }
  return {
    traceId: idFromBytes(traceId, 16, "traceId"),
    spanId: idFromBytes(spanId, 8, "spanId"),
    parentSpanId: parentSpanId.length === 0 ? undefined : idFromBytes(parentSpanId, 8, "parentSpanId"),
    traceState: traceState === "" ? undefined : traceState,
    name,
    kind,
    startTimeUnixNano,
    endTimeUnixNano,
    attributes,
    status,
    events,
    links,
  };
}

function readEvent(r: ProtobufReader): ReceivedSpan["events"][number] {
  let timeUnixNano = 0n;
  let name = "";
  const attributes: OtlpAttributes = {};
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        timeUnixNano = r.fixed64();
        break;
      case 2:
        name = r.string();
        break;
      case 3:
        readKeyValueInto(r.message(), attributes);
        break;
      default:
        r.skip();
    }
  }
  return { name, timeUnixNano, attributes };
}

function readLink(r: ProtobufReader): ReceivedSpan["links"][number] {
  let traceId: Uint8Array = new Uint8Array();
  let spanId: Uint8Array = new Uint8Array();
  const attributes: OtlpAttributes = {};
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        traceId = r.bytes();
        break;
      case 2:
        spanId = r.bytes();
        break;
      case 4:
        readKeyValueInto(r.message(), attributes);
        break;
      default:
        r.skip();
    }
  }
  return { traceId: idFromBytes(traceId, 16, "link traceId"), spanId: idFromBytes(spanId, 8, "link spanId"), attributes };
}

function readStatus(r: ProtobufReader): ReceivedSpan["status"] {
  let code = 0;
  let message = "";
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 2:
        message = r.string();
        break;
      case 3:
        code = r.uint32();
        break;
      default:
        r.skip(); // field 1 was the deprecated code; ignored like any unknown field
    }
  }
  return message === "" ? { code } : { code, message };
}

function readKeyValueInto(r: ProtobufReader, into: Record<string, OtlpValue>): void {
  let key = "";
  let value: OtlpValue = null;
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        key = r.string();
        break;
      case 2:
        value = readAnyValue(r.message());
        break;
      default:
        r.skip();
    }
  }
  into[key] = value;
}

function readAnyValue(r: ProtobufReader): OtlpValue {
  // A oneof: when several members appear, the last one wins.
  let value: OtlpValue = null;
  for (let f = r.nextField(); f !== undefined; f = r.nextField()) {
    switch (f) {
      case 1:
        value = r.string();
        break;
      case 2:
        value = r.bool();
        break;
      case 3:
        value = intValue(r.int64());
        break;
      case 4:
        value = r.double();
        break;
      case 5: {
        const items: OtlpValue[] = [];
        const arr = r.message();
        for (let g = arr.nextField(); g !== undefined; g = arr.nextField()) {
          if (g === 1) items.push(readAnyValue(arr.message()));
          else arr.skip();
        }
        value = items;
        break;
      }
      case 6: {
        const record: Record<string, OtlpValue> = {};
        const list = r.message();
        for (let g = list.nextField(); g !== undefined; g = list.nextField()) {
          if (g === 1) readKeyValueInto(list.message(), record);
          else list.skip();
        }
        value = record;
        break;
      }
      case 7:
        value = Uint8Array.from(r.bytes());
        break;
      default:
        r.skip();
    }
  }
  return value;
}

function idFromBytes(bytes: Uint8Array, length: number, what: string): string {
  if (bytes.length !== length) {
    throw new ProtobufDecodeError(`${what} must be ${length} bytes, got ${bytes.length}`);
  }
  return Buffer.from(bytes).toString("hex");
}

function intValue(value: bigint): number | bigint {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

// ---------------------------------------------------------------------------
// OTLP JSON: lowerCamelCase field names (snake_case also accepted, as the collector does),
// trace and span ids as hex strings, 64-bit integers as decimal strings or numbers,
// enums as integers (names also accepted), bytes as base64.

/** Decodes an OTLP JSON ExportTraceServiceRequest already parsed with JSON.parse. */
export function decodeJsonTraceRequest(body: unknown): ReceivedSpan[] {
  const request = asObject(body, "request");
  return asArray(field(request, "resourceSpans", "resource_spans"), "resourceSpans").flatMap((item) => {
    const resourceSpans = asObject(item, "resourceSpans[]");
    const resourceObject = field(resourceSpans, "resource");
    const resource =
      resourceObject === undefined || resourceObject === null
        ? {}
        : jsonAttributes(field(asObject(resourceObject, "resource"), "attributes"));
    return asArray(field(resourceSpans, "scopeSpans", "scope_spans"), "scopeSpans").flatMap((scopeItem) => {
      const scopeSpans = asObject(scopeItem, "scopeSpans[]");
      const scope = jsonScope(field(scopeSpans, "scope"));
      return asArray(field(scopeSpans, "spans"), "spans").map((spanItem) => ({
        ...jsonSpan(asObject(spanItem, "spans[]")),
        resource,
        scope,
      }));
    });
  });
}

function jsonScope(value: unknown): ReceivedSpan["scope"] {
  if (value === undefined || value === null) return { name: "" };
  const scope = asObject(value, "scope");
  const name = asString(field(scope, "name"), "scope.name");
  const version = asString(field(scope, "version"), "scope.version");
  return version === "" ? { name } : { name, version };
}

function jsonSpan(span: Record<string, unknown>): SpanWithoutContext {
  const parentSpanId = asString(field(span, "parentSpanId", "parent_span_id"), "parentSpanId");
  const traceState = asString(field(span, "traceState", "trace_state"), "traceState");
  const statusValue = field(span, "status");
  let status: ReceivedSpan["status"] = { code: 0 };
  if (statusValue !== undefined && statusValue !== null) {
    const statusObject = asObject(statusValue, "status");
    const code = jsonEnum(field(statusObject, "code"), STATUS_CODE_NAMES, "status.code");
    const message = asString(field(statusObject, "message"), "status.message");
    status = message === "" ? { code } : { code, message };
  }
  return {
    traceId: hexId(field(span, "traceId", "trace_id"), 16, "traceId"),
    spanId: hexId(field(span, "spanId", "span_id"), 8, "spanId"),
    parentSpanId: parentSpanId === "" ? undefined : hexId(parentSpanId, 8, "parentSpanId"),
    traceState: traceState === "" ? undefined : traceState,
    name: asString(field(span, "name"), "name"),
    kind: jsonEnum(field(span, "kind"), SPAN_KIND_NAMES, "kind"),
    startTimeUnixNano: jsonUint64(field(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano"),
    endTimeUnixNano: jsonUint64(field(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
    attributes: jsonAttributes(field(span, "attributes")),
    status,
    events: asArray(field(span, "events"), "events").map((item) => {
      const event = asObject(item, "events[]");
      return {
        name: asString(field(event, "name"), "event.name"),
        timeUnixNano: jsonUint64(field(event, "timeUnixNano", "time_unix_nano"), "event.timeUnixNano"),
        attributes: jsonAttributes(field(event, "attributes")),
      };
    }),
    links: asArray(field(span, "links"), "links").map((item) => {
      const link = asObject(item, "links[]");
      return {
        traceId: hexId(field(link, "traceId", "trace_id"), 16, "link.traceId"),
        spanId: hexId(field(link, "spanId", "span_id"), 8, "link.spanId"),
        attributes: jsonAttributes(field(link, "attributes")),
      };
    }),
  };
}

function jsonAttributes(value: unknown): OtlpAttributes {
  const attributes: OtlpAttributes = {};
  for (const item of asArray(value, "attributes")) {
    const kv = asObject(item, "attributes[]");
    const rawValue = field(kv, "value");
    attributes[asString(field(kv, "key"), "key")] =
      rawValue === undefined || rawValue === null ? null : jsonAnyValue(asObject(rawValue, "value"));
  }
  return attributes;
}

function jsonAnyValue(value: Record<string, unknown>): OtlpValue {
  const s = field(value, "stringValue", "string_value");
  if (s !== undefined) return asString(s, "stringValue");
  const b = field(value, "boolValue", "bool_value");
  if (b !== undefined) {
    if (typeof b !== "boolean") throw new OtlpDecodeError("boolValue must be a boolean");
    return b;
  }
  const i = field(value, "intValue", "int_value");
  if (i !== undefined) return intValue(BigInt.asIntN(64, jsonInteger(i, "intValue")));
  const d = field(value, "doubleValue", "double_value");
  if (d !== undefined) return jsonDouble(d);
  const a = field(value, "arrayValue", "array_value");
  if (a !== undefined) {
    return asArray(field(asObject(a, "arrayValue"), "values"), "arrayValue.values").map((item) =>
      jsonAnyValue(asObject(item, "arrayValue.values[]")),
    );
  }
  const kv = field(value, "kvlistValue", "kvlist_value");
  if (kv !== undefined) return jsonAttributes(field(asObject(kv, "kvlistValue"), "values"));
  const bytes = field(value, "bytesValue", "bytes_value");
  if (bytes !== undefined) return Uint8Array.from(Buffer.from(asString(bytes, "bytesValue"), "base64"));
  return null;
}

/** Reads a field by its JSON name, falling back to the proto field name. */
function field(object: Record<string, unknown>, camel: string, snake?: string): unknown {
  const value = object[camel];
  return value === undefined && snake !== undefined ? object[snake] : value;
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new OtlpDecodeError(`${what} must be an object`);
  }
  return value as Record<string, unknown>;
}

function asArray(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new OtlpDecodeError(`${what} must be an array`);
  return value;
}

function asString(value: unknown, what: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new OtlpDecodeError(`${what} must be a string`);
  return value;
}

function hexId(value: unknown, length: number, what: string): string {
  const hex = asString(value, what);
  if (!new RegExp(`^[0-9a-fA-F]{${length * 2}}$`).test(hex)) {
    throw new OtlpDecodeError(`${what} must be ${length * 2} hex characters, got ${JSON.stringify(hex)}`);
  }
  return hex.toLowerCase();
}

function jsonInteger(value: unknown, what: string): bigint {
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (typeof value === "string" && /^-?\d+$/.test(value)) return BigInt(value);
  throw new OtlpDecodeError(`${what} must be an integer or a decimal string, got ${JSON.stringify(value)}`);
}

function jsonUint64(value: unknown, what: string): bigint {
  if (value === undefined || value === null) return 0n;
  const n = jsonInteger(value, what);
  if (n < 0n || n > 0xffffffffffffffffn) throw new OtlpDecodeError(`${what} is out of the uint64 range`);
  return n;
}

function jsonDouble(value: unknown): number {
  if (typeof value === "number") return value;
  if (value === "NaN") return Number.NaN;
  if (value === "Infinity") return Number.POSITIVE_INFINITY;
  if (value === "-Infinity") return Number.NEGATIVE_INFINITY;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  throw new OtlpDecodeError(`doubleValue must be a number, got ${JSON.stringify(value)}`);
}

function jsonEnum(value: unknown, names: string[], what: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === "string" && names.includes(value)) return names.indexOf(value);
  throw new OtlpDecodeError(`${what} must be an enum number, got ${JSON.stringify(value)}`);
}
