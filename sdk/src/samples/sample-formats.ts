/**
 * Example values of string formats (the ones ajv-formats checks, and common ones it does not), the bounds of integer
 * formats, and several different values of one format (for `uniqueItems`): what a sample of a `format` uses.
 */

/** A valid value of each string format. */
export const STRING_FORMATS: Readonly<Record<string, string>> = {
  "date-time": "2025-01-15T09:30:00Z",
  date: "2025-01-15",
  time: "09:30:00Z",
  duration: "P1D",
  email: "ada@example.com",
  "idn-email": "ada@example.com",
  hostname: "api.example.com",
  "idn-hostname": "api.example.com",
  ipv4: "192.0.2.10",
  ipv6: "2001:db8::10",
  uri: "https://example.com/resource",
  url: "https://example.com/resource",
  "uri-reference": "/resource",
  iri: "https://example.com/resource",
  "iri-reference": "/resource",
  "uri-template": "https://example.com/{id}",
  uuid: "3f2b9c1e-8d4a-4c6b-9e2f-1a7d5b0c4e68",
  byte: "ZXhhbXBsZQ==",
  base64: "ZXhhbXBsZQ==",
  binary: "ZXhhbXBsZQ==",
  "json-pointer": "/example",
  "relative-json-pointer": "0",
  regex: "^example$",
  password: "s3cret-example",
  int32: "1",
  int64: "1",
  decimal: "1.5",
  "unix-time": "1736933400",
  "ip-address": "192.0.2.10",
  phone: "+15555550100",
};

/** Integer formats ajv-formats checks, with their bounds. */
export const INTEGER_FORMATS: Readonly<Record<string, [number, number]>> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** The `variant`-th of several different strings of one format (for uniqueItems). */
export function varied(text: string, format: string | undefined, variant: number): string {
  switch (format) {
    case "uuid":
      return `${text.slice(0, -4)}${(0x4e68 + variant).toString(16).slice(-4)}`;
    case "email":
    case "idn-email":
      return text.replace("@", `${variant + 1}@`);
    case "date":
      return `2025-01-${String(15 + (variant % 14)).padStart(2, "0")}`;
    case "date-time":
      return `2025-01-${String(15 + (variant % 14)).padStart(2, "0")}T09:30:00Z`;
    case "uri":
    case "url":
    case "iri":
      return `${text}/${variant + 1}`;
    case "ipv4":
      return `192.0.2.${(10 + variant) % 255}`;
    case undefined:
      return `${text}${variant + 1}`;
    default:
      return text;
  }
}
