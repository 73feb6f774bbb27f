/**
 * FABRIC_CONSOLE_TRACE_URL: the template the run page links a run's trace with. A good one reaches the page through
 * /console/config.json; a bad one stops the start with a sentence naming the variable. The page's filling of the
 * template (format.ts) puts the trace id in URL-encoded.
 */
import { describe, it, expect, afterEach } from "vitest";
import { call } from "../../../core/test/support/gateway-http.js";
import { TRACE_URL_VARIABLE } from "../src/trace-url.js";
import { traceUrlTemplate } from "../src/settings.js";
import { traceHref } from "../web/src/format.js";
import { startConsoleFabric } from "./support/console-fabric.js";

const JAEGER = "http://127.0.0.1:16686/trace/{trace_id}";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";

describe("traceUrlTemplate", () => {
  it("takes an absolute http(s) URL holding {trace_id}, as given", () => {
    expect(traceUrlTemplate({ [TRACE_URL_VARIABLE]: JAEGER })).toBe(JAEGER);
    const tempo = "https://grafana.example.com/explore?left=%7B%22queries%22:%5B%7B%22query%22:%22{trace_id}%22%7D%5D%7D";
    expect(traceUrlTemplate({ [TRACE_URL_VARIABLE]: ` ${tempo}\n` })).toBe(tempo);
  });

  it("is null when the variable is unset or empty", () => {
    expect(traceUrlTemplate({})).toBeNull();
    expect(traceUrlTemplate({ [TRACE_URL_VARIABLE]: "  " })).toBeNull();
  });

  it("refuses a template without {trace_id}, naming the variable", () => {
    expect(() => traceUrlTemplate({ [TRACE_URL_VARIABLE]: "http://127.0.0.1:16686/trace/" })).toThrow(
      /^FABRIC_CONSOLE_TRACE_URL="http:\/\/127\.0\.0\.1:16686\/trace\/" does not hold \{trace_id\}/,
    );
  });

  it("refuses a relative URL", () => {
    expect(() => traceUrlTemplate({ [TRACE_URL_VARIABLE]: "/trace/{trace_id}" })).toThrow(/^FABRIC_CONSOLE_TRACE_URL="\/trace\/\{trace_id\}" is not an absolute URL/);
  });

  it("refuses a javascript: or file: URL", () => {
    expect(() => traceUrlTemplate({ [TRACE_URL_VARIABLE]: "javascript:alert('{trace_id}')" })).toThrow(/^FABRIC_CONSOLE_TRACE_URL=.* uses javascript: where only http: and https: are allowed/);
    expect(() => traceUrlTemplate({ [TRACE_URL_VARIABLE]: "file:///traces/{trace_id}" })).toThrow(/uses file: where only http: and https: are allowed/);
  });
});

describe("traceHref (the page's link)", () => {
  it("puts the trace id, URL-encoded, in place of every {trace_id}", () => {
    expect(traceHref(JAEGER, TRACE_ID)).toBe(`http://127.0.0.1:16686/trace/${TRACE_ID}`);
    expect(traceHref("https://t.example/{trace_id}?again={trace_id}", "a b/&c")).toBe("https://t.example/a%20b%2F%26c?again=a%20b%2F%26c");
  });

  it("gives no link without a template, or with one that is not http(s)", () => {
    expect(traceHref(null, TRACE_ID)).toBeUndefined();
    expect(traceHref(undefined, TRACE_ID)).toBeUndefined();
    expect(traceHref("javascript:alert('{trace_id}')", TRACE_ID)).toBeUndefined();
  });
});

describe("FABRIC_CONSOLE_TRACE_URL on a fabric", () => {
  const before = process.env[TRACE_URL_VARIABLE];
  afterEach(() => {
    if (before === undefined) delete process.env[TRACE_URL_VARIABLE];
    else process.env[TRACE_URL_VARIABLE] = before;
  });

  it("reaches the page as trace_url in /console/config.json", async () => {
    process.env[TRACE_URL_VARIABLE] = JAEGER;
    const fabric = await startConsoleFabric();
    try {
      const r = await call("GET", `${fabric.urls["run-gateway"]}/console/config.json`);
      expect(r.status).toBe(200);
      expect(r.body.trace_url).toBe(JAEGER);
    } finally {
      await fabric.close();
    }
  });

  it("stops the start when it is bad, with a sentence naming the variable", async () => {
    process.env[TRACE_URL_VARIABLE] = "ftp://traces.example/{trace_id}";
    let fabric: Awaited<ReturnType<typeof startConsoleFabric>> | undefined;
    try {
      await expect(
        startConsoleFabric().then((f) => {
          fabric = f;
          return f;
        }),
      ).rejects.toThrow(/@nodefabric\/plugin-console: FABRIC_CONSOLE_TRACE_URL="ftp:\/\/traces\.example\/\{trace_id\}" uses ftp: where only http: and https: are allowed/);
    } finally {
      await fabric?.close();
    }
  });
});
