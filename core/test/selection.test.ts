import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { validatorFor, type NodeType } from "@nodefabric/schemas";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { buildSelection } from "../src/services/selection/index.js";
import { SelectionClient } from "../src/clients/selection-client.js";
import { FabricError } from "../src/http/errors.js";
import { checkedCall, type Res } from "./support/checked-call.js";
import { mergeConstraints } from "../src/engine/constraints.js";

const isCandidateSet = validatorFor("candidate_set");
const isHealth = validatorFor("health");

/** A checked call that also proves every candidate set answered is a valid CandidateSet. */
async function call(base: string, method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const res = await checkedCall(base, method, urlPath, body, headers);
  if (res.status === 200 && urlPath.startsWith("/v1/candidate-sets")) {
    expect(isCandidateSet(res.body), `not a CandidateSet: ${JSON.stringify(res.body)} ${JSON.stringify(isCandidateSet.errors)}`).toBe(true);
  }
  return res;
}

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  return `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
}

type Side = "read" | "write" | "irreversible" | undefined;

function nodeType(
  node_type_id: string,
  version: string,
  description: string,
  side: Side,
  props: { input?: Record<string, string>; output?: Record<string, string> } = {},
  labels?: Record<string, string>,
  kind: "atomic" | "composite" = "atomic",
): NodeType {
  const schema = (p: Record<string, string> = {}) => ({
    type: "object",
    properties: Object.fromEntries(Object.entries(p).map(([k, d]) => [k, { type: "string", description: d }])),
  });
  const nt: NodeType = { node_type_id, version, kind, description, input_schema: schema(props.input), output_schema: schema(props.output) };
  if (side) nt.constraints = { gates: { side_effect_class: side } };
  if (labels) nt.metadata = { labels };
  return nt;
}

/** A realistic catalogue: reads, writes, irreversible payments, an undeclared side effect and composites. */
const CATALOGUE: NodeType[] = [
  nodeType("weather.current", "1.0.0", "Current weather conditions for a city", "read", { input: { city: "City name" }, output: { temperature_c: "Air temperature" } }),
  nodeType(
    "weather.current",
    "1.2.0",
    "Current weather conditions (temperature, wind, humidity) for a city",
    "read",
    { input: { city: "City name", units: "metric or imperial" }, output: { temperature_c: "Air temperature", wind_kph: "Wind speed", humidity: "Relative humidity" } },
    { domain: "weather" },
  ),
  nodeType("weather.forecast", "1.0.0", "Multi-day weather forecast for a city", "read", { input: { city: "City name", days: "Number of days" }, output: { high_c: "Daily high", low_c: "Daily low" } }, { domain: "weather" }),
  nodeType("fx.rate", "2.1.0", "Foreign exchange rate between two currencies", "read", { input: { from: "ISO currency code", to: "ISO currency code" }, output: { rate: "Units of `to` per unit of `from`" } }, { domain: "finance" }),
  nodeType("fx.convert", "1.0.0", "Convert an amount of money from one currency to another", "read", { input: { amount: "Amount", from: "Currency", to: "Currency" }, output: { converted: "Converted amount" } }, { domain: "finance" }),
  nodeType("hotel.search", "1.0.0", "Search hotels available in a city for given dates", "read", { input: { city: "City", checkIn: "Arrival date", checkOut: "Departure date" }, output: { hotels: "Matching hotels" } }, { domain: "travel" }),
  nodeType("hotel.book", "1.3.0", "Book a hotel room and return the reservation", "write", { input: { hotel_id: "Hotel", checkIn: "Arrival date", guests: "Number of guests" }, output: { reservation_id: "Booking reference" } }, { domain: "travel" }),
  nodeType("flight.search", "1.0.0", "Search flights between two airports", "read", { input: { origin: "Airport", destination: "Airport" }, output: { flights: "Flights" } }, { domain: "travel" }),
  nodeType("payments.charge", "3.0.0", "Charge a customer's card; the money moves immediately", "irreversible", { input: { amount: "Amount", currency: "Currency", card_token: "Tokenised card" }, output: { charge_id: "Charge" } }, { domain: "payments" }),
  nodeType("payments.refund", "3.0.0", "Refund a previous card charge", "irreversible", { input: { charge_id: "Charge to refund" }, output: { refund_id: "Refund" } }, { domain: "payments" }),
  nodeType("email.send", "1.0.0", "Send an email message to a recipient", "write", { input: { to: "Recipient address", subject: "Subject", body: "Text" }, output: { message_id: "Message" } }, { domain: "messaging" }),
  // Declares no side-effect class: Selection must treat it as "write".
  nodeType("geo.geocode", "1.0.0", "Turn an address or place name of a city into latitude and longitude", undefined, { input: { address: "Address" }, output: { lat: "Latitude", lon: "Longitude" } }, { domain: "maps" }),
  nodeType("trip.plan", "1.0.0", "Plan a trip to a city: weather, currency exchange and a hotel", "write", { input: { city: "Destination" }, output: { plan: "Plan" } }, { domain: "travel" }, "composite"),
  nodeType("travel.itinerary", "0.9.0", "Build a day by day travel itinerary for a city trip", "read", { input: { city: "City" }, output: { days: "Days" } }, { domain: "travel" }, "composite"),
];

function req(goal: string, extra: Record<string, unknown> = {}, spec: Record<string, unknown> = {}) {
  return { subtask_spec: { subtask_id: "st-1", goal, ...spec }, ...extra };
}

const ids = (r: Res) => r.body.candidates.map((c: { node_type_ref: { node_type_id: string } }) => c.node_type_ref.node_type_id);

describe("selection over a real registry", () => {
  let registry: FastifyInstance;
  let selection: FastifyInstance;
  let registryBase: string;
  let base: string;

  beforeAll(async () => {
    const dir = tmpDir();
    registry = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    registryBase = await listen(registry);
    for (const nt of CATALOGUE) {
      const r = await call(registryBase, "POST", "/v1/node-types", { node_type: nt });
      expect(r.status).toBe(200);
    }
    selection = await buildSelection({ logger: false, dbPath: path.join(dir, "selection.db"), registryUrl: registryBase, cacheTtlMs: 60_000 });
    base = await listen(selection);
  });
  afterAll(async () => {
    await selection.close();
    await registry.close();
  });

  it("ranks the node type that best fits the goal first, at score 1, with its latest version", async () => {
    const r = await call(base, "POST", "/v1/candidate-sets", req("get the current weather in Paris"));
    expect(r.status).toBe(200);
    expect(r.body.subtask_id).toBe("st-1");
    expect(r.body.candidate_set_id).toMatch(/^cs_/);
    expect(Date.parse(r.body.generated_at)).not.toBeNaN();
    expect(r.body.candidates[0]).toMatchObject({ node_type_ref: { node_type_id: "weather.current", version: "1.2.0" }, score: 1 });
    expect(ids(r)[1]).toBe("weather.forecast");
    const scores: number[] = r.body.candidates.map((c: { score: number }) => c.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(scores.every((s) => s >= 0 && s <= 1)).toBe(true);
    expect(scores[1]).toBeLessThan(1);
  });

  it("explains each candidate with the terms that matched and where", async () => {
    const r = await call(base, "POST", "/v1/candidate-sets", req("current weather"));
    const top = r.body.candidates[0];
    expect(top.node_type_ref.node_type_id).toBe("weather.current");
    expect(top.rationale).toContain('matched "current" in node_type_id, description');
    expect(top.rationale).toContain('"weather" in node_type_id, description, labels');
  });

  it.each([
    ["exchange rate from EUR to USD", "fx.rate"],
    ["convert 100 euros into another currency", "fx.convert"],
    ["book a hotel room in Lisbon", "hotel.book"],
    ["find hotels available in Rome", "hotel.search"],
    ["charge the customer's card", "payments.charge"],
    ["refund the charge", "payments.refund"],
    ["send an email to the guest", "email.send"],
    ["latitude and longitude of an address", "geo.geocode"],
    ["search flights from LIS to JFK", "flight.search"],
    ["booking a room", "hotel.book"],
  ])("ranks %j → %s first", async (goal, expected) => {
    const r = await call(base, "POST", "/v1/candidate-sets", req(goal));
    expect(r.status).toBe(200);
    expect(ids(r)[0]).toBe(expected);
    expect(r.body.candidates[0].score).toBe(1);
  });

  it("caps side effects: read excludes writes, irreversible ones and undeclared ones; write still excludes irreversible", async () => {
    const read = await call(base, "POST", "/v1/candidate-sets", req("book a hotel room", { constraints: { gates: { side_effect_class: "read" } } }));
    expect(ids(read)).toContain("hotel.search");
    expect(ids(read)).not.toContain("hotel.book");
    expect(read.body.constraints).toEqual({ gates: { side_effect_class: "read" } });

    const geoRead = await call(base, "POST", "/v1/candidate-sets", req("latitude longitude address", {}, { constraints: { gates: { side_effect_class: "read" } } }));
    expect(ids(geoRead)).not.toContain("geo.geocode");
    const geoWrite = await call(base, "POST", "/v1/candidate-sets", req("latitude longitude address", {}, { constraints: { gates: { side_effect_class: "write" } } }));
    expect(ids(geoWrite)[0]).toBe("geo.geocode");

    const pay = await call(base, "POST", "/v1/candidate-sets", req("charge the customer's card", { constraints: { gates: { side_effect_class: "write" } } }));
    expect(ids(pay)).not.toContain("payments.charge");
    expect(ids(pay)).not.toContain("payments.refund");
    const payAll = await call(base, "POST", "/v1/candidate-sets", req("charge the customer's card", { constraints: { gates: { side_effect_class: "irreversible" } } }));
    expect(ids(payAll)[0]).toBe("payments.charge");
  });

  it("applies allow lists (intersected) and deny lists (united) from the request and the subtask", async () => {
    const denied = await call(base, "POST", "/v1/candidate-sets", req("current weather", { constraints: { candidates: { denied_node_type_ids: ["weather.current"] } } }));
    expect(ids(denied)[0]).toBe("weather.forecast");
    expect(ids(denied)).not.toContain("weather.current");

    const allowed = await call(
      base,
      "POST",
      "/v1/candidate-sets",
      req(
        "currency exchange rate",
        { constraints: { candidates: { allowed_node_type_ids: ["fx.rate", "fx.convert", "trip.plan"] } } },
        { constraints: { candidates: { allowed_node_type_ids: ["fx.convert", "trip.plan", "weather.current"], denied_node_type_ids: ["trip.plan"] } } },
      ),
    );
    expect(ids(allowed)).toEqual(["fx.convert"]);
    expect(allowed.body.constraints.candidates).toEqual({ allowed_node_type_ids: ["fx.convert", "trip.plan"], denied_node_type_ids: ["trip.plan"] });

    const disjoint = await call(
      base,
      "POST",
      "/v1/candidate-sets",
      req("weather", { constraints: { candidates: { allowed_node_type_ids: ["fx.rate"] } } }, { constraints: { candidates: { allowed_node_type_ids: ["weather.current"] } } }),
    );
    expect(disjoint.status).toBe(200);
    expect(disjoint.body.candidates).toEqual([]);
  });

  it("lists allowed node types the goal does not match after the matches, at score 0", async () => {
    const r = await call(base, "POST", "/v1/candidate-sets", req("current weather", { constraints: { candidates: { allowed_node_type_ids: ["email.send", "weather.current", "no.such.type"] } } }));
    expect(ids(r)).toEqual(["weather.current", "email.send"]);
    expect(r.body.candidates[1]).toMatchObject({ score: 0, rationale: expect.stringContaining("allowed_node_type_ids") });
  });

  it("filters by kind through extensions[\"nodefabric.kind\"], and refuses an unknown kind with 400", async () => {
    const c = await call(base, "POST", "/v1/candidate-sets", req("plan a city trip with weather and a hotel", { extensions: { "nodefabric.kind": "composite" } }));
    expect(c.status).toBe(200);
    expect(ids(c)).toEqual(["trip.plan", "travel.itinerary"]);
    expect(c.body.extensions).toEqual({ "nodefabric.kind": "composite" });
    const a = await call(base, "POST", "/v1/candidate-sets", req("plan a city trip with weather and a hotel", { extensions: { "nodefabric.kind": "atomic" } }));
    expect(ids(a)).not.toContain("trip.plan");
    expect(ids(a).length).toBeGreaterThan(0);
    const bad = await call(base, "POST", "/v1/candidate-sets", req("weather", { extensions: { "nodefabric.kind": "molecular" } }));
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect(bad.body.error.details.errors[0].path).toBe("/extensions/nodefabric.kind");
  });

  it("bounds the set: 5 by default, the lowest max_candidates_per_subtask, at most 50", async () => {
    const broad = "city weather hotel currency payment email flight address trip";
    const d = await call(base, "POST", "/v1/candidate-sets", req(broad));
    expect(d.body.top_k).toBe(5);
    expect(d.body.candidates).toHaveLength(5);

    const two = await call(base, "POST", "/v1/candidate-sets", req(broad, { constraints: { candidates: { max_candidates_per_subtask: 7 } } }, { constraints: { candidates: { max_candidates_per_subtask: 2 } } }));
    expect(two.body.top_k).toBe(2);
    expect(two.body.candidates).toHaveLength(2);
    expect(two.body.constraints.candidates.max_candidates_per_subtask).toBe(2);

    const big = await call(base, "POST", "/v1/candidate-sets", req(broad, { constraints: { candidates: { max_candidates_per_subtask: 500 } } }));
    expect(big.status).toBe(200);
    expect(big.body.top_k).toBe(50);
    expect(big.body.candidates.length).toBeGreaterThan(5);
    expect(big.body.candidates.length).toBeLessThanOrEqual(13);

    const zero = await call(base, "POST", "/v1/candidate-sets", req(broad, { constraints: { candidates: { max_candidates_per_subtask: 0 } } }));
    expect(zero.status).toBe(400);
    expect(zero.body.error.code).toBe("invalid_request");
    expect(zero.body.error.details.errors[0].path).toBe("/constraints/candidates/max_candidates_per_subtask");
  });

  it("answers a valid empty set when nothing matches", async () => {
    const r = await call(base, "POST", "/v1/candidate-sets", req("quantum entanglement spectroscopy"));
    expect(r.status).toBe(200);
    expect(r.body.candidates).toEqual([]);
    expect(r.body.top_k).toBe(5);
  });

  it("stores every set and reads it back by id; an unknown id is 404 candidate_set_not_found", async () => {
    const r = await call(base, "POST", "/v1/candidate-sets", req("exchange rate"));
    const g = await call(base, "GET", `/v1/candidate-sets/${r.body.candidate_set_id}`);
    expect(g.status).toBe(200);
    expect(g.body).toEqual(r.body);
    const missing = await call(base, "GET", "/v1/candidate-sets/cs_nope");
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("candidate_set_not_found");
    expect(missing.body.error.details).toEqual({ candidate_set_id: "cs_nope" });
  });

  it("refuses bad bodies with 400 invalid_request", async () => {
    const cases: Array<[unknown, string]> = [
      [{ subtask_spec: { subtask_id: "s", goal: "weather" }, colour: "red" }, "/colour"],
      [{ constraints: {} }, "/subtask_spec"],
      [{ subtask_spec: { subtask_id: "s" } }, "/subtask_spec/goal"],
      [{ subtask_spec: { subtask_id: "s", goal: "" } }, "/subtask_spec/goal"],
      [{ subtask_spec: { subtask_id: "s", goal: "x" }, constraints: { gates: { side_effect_class: "nuclear" } } }, "/constraints/gates/side_effect_class"],
      [{ subtask_spec: { subtask_id: "s", goal: "x" }, run_context: { extensions: { "nodefabric.constraints": { gates: { side_effect_class: "nuclear" } } } } }, "/run_context/extensions/nodefabric.constraints/gates/side_effect_class"],
    ];
    for (const [body, where] of cases) {
      const r = await call(base, "POST", "/v1/candidate-sets", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.details.errors.map((e: { path: string }) => e.path)).toContain(where);
    }
    const notJson = await call(base, "POST", "/v1/candidate-sets", "{");
    expect(notJson.status).toBe(400);
    const text = await call(base, "POST", "/v1/candidate-sets", "goal=weather", { "content-type": "text/plain" });
    expect(text.status).toBe(415);
    const wrongMethod = await call(base, "DELETE", "/v1/candidate-sets");
    expect(wrongMethod.status).toBe(405);
  });

  it("merges constraints carried by the run context as the outermost envelope", async () => {
    const r = await call(
      base,
      "POST",
      "/v1/candidate-sets",
      req("book a hotel room", { run_context: { tenant_id: "t1", extensions: { "nodefabric.constraints": { gates: { side_effect_class: "read" }, candidates: { max_candidates_per_subtask: 3 } } } } }),
    );
    expect(r.status).toBe(200);
    expect(ids(r)).not.toContain("hotel.book");
    expect(r.body.top_k).toBe(3);
  });

  it("sees a node type published after the index was built: a miss looks again", async () => {
    const goal = "translate a sentence into portuguese";
    const before = await call(base, "POST", "/v1/candidate-sets", req(goal));
    expect(before.body.candidates).toEqual([]);
    const nt = nodeType("text.translate", "1.0.0", "Translate a sentence into a target language such as Portuguese", "read", { input: { text: "Text", target_language: "Language" } });
    expect((await call(registryBase, "POST", "/v1/node-types", { node_type: nt })).status).toBe(200);
    // Early refreshes after a miss are rate-limited to one per 250 ms.
    await new Promise((r) => setTimeout(r, 300));
    const after = await call(base, "POST", "/v1/candidate-sets", req(goal));
    expect(ids(after)[0]).toBe("text.translate");
  });

  it("reports the registry and the store in its health", async () => {
    const h = await call(base, "GET", "/v1/health");
    expect(h.status).toBe(200);
    expect(isHealth(h.body)).toBe(true);
    expect(h.body.status).toBe("ok");
    expect(h.body.checks).toContainEqual({ name: "store", status: "ok" });
    expect(h.body.checks.find((c: { name: string }) => c.name === "registry")).toMatchObject({ status: "ok", details: { node_types: expect.any(Number) } });
  });

  it("works through the SelectionClient", async () => {
    const client = new SelectionClient(base);
    try {
      const set = await client.createCandidateSet({ subtask_spec: { subtask_id: "book", goal: "book a hotel in Paris" } });
      expect(set.candidates[0].node_type_ref.node_type_id).toBe("hotel.book");
      expect(await client.getCandidateSet(set.candidate_set_id)).toEqual(set);
      const err = await client.getCandidateSet("cs_missing").catch((e: unknown) => e);
      expect(FabricError.is(err) && err.code).toBe("candidate_set_not_found");
    } finally {
      await client.close();
    }
  });
});

describe("selection when the registry is down", () => {
  it("answers 502 upstream_unavailable and reports the registry as degraded", async () => {
    const dir = tmpDir();
    const registry = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    const registryBase = await listen(registry);
    await call(registryBase, "POST", "/v1/node-types", { node_type: CATALOGUE[1] });
    const selection = await buildSelection({ logger: false, dbPath: path.join(dir, "selection.db"), registryUrl: registryBase, cacheTtlMs: 0 });
    const base = await listen(selection);
    try {
      const ok = await call(base, "POST", "/v1/candidate-sets", req("current weather"));
      expect(ok.status).toBe(200);
      expect(ids(ok)).toEqual(["weather.current"]);

      await registry.close();
      const down = await call(base, "POST", "/v1/candidate-sets", req("current weather"));
      expect(down.status).toBe(502);
      expect(down.body.error.code).toBe("upstream_unavailable");
      expect(down.body.error.retryable).toBe(true);

      const h = await call(base, "GET", "/v1/health");
      expect(h.status).toBe(200);
      expect(h.body.status).toBe("degraded");
      expect(h.body.checks.find((c: { name: string }) => c.name === "registry").status).toBe("degraded");
    } finally {
      await selection.close();
      await registry.close();
    }
  });

  it("answers 502 when the registry was never reachable", async () => {
    const dir = tmpDir();
    const selection = await buildSelection({ logger: false, dbPath: path.join(dir, "selection.db"), registryUrl: "http://127.0.0.1:1" });
    const base = await listen(selection);
    try {
      const r = await call(base, "POST", "/v1/candidate-sets", req("current weather"));
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe("upstream_unavailable");
    } finally {
      await selection.close();
    }
  });
});

describe("selection with an in-process source", () => {
  it("reads node types through the nodeTypes option, within the TTL only once, and keeps sets across a restart", async () => {
    const dir = tmpDir();
    let reads = 0;
    const source = async () => {
      reads++;
      return CATALOGUE;
    };
    const dbPath = path.join(dir, "selection.db");
    const app = await buildSelection({ logger: false, dbPath, nodeTypes: source, cacheTtlMs: 60_000 });
    const base = await listen(app);
    const first = await call(base, "POST", "/v1/candidate-sets", req("foreign exchange rate"));
    expect(ids(first)[0]).toBe("fx.rate");
    await call(base, "POST", "/v1/candidate-sets", req("weather forecast for three days"));
    expect(reads).toBe(1);
    await app.close();

    const again = await buildSelection({ logger: false, dbPath, nodeTypes: source });
    const base2 = await listen(again);
    try {
      const g = await call(base2, "GET", `/v1/candidate-sets/${first.body.candidate_set_id}`);
      expect(g.status).toBe(200);
      expect(g.body).toEqual(first.body);
    } finally {
      await again.close();
    }
  });
});

describe("mergeConstraints", () => {
  it("takes the lowest number, intersects allow lists, unites deny lists and keeps the strictest gate", () => {
    const run = {
      structural: { max_depth: 5, max_children_per_composite: 10 },
      candidates: { max_candidates_per_subtask: 10, allowed_node_type_ids: ["a", "b", "c"], denied_node_type_ids: ["x"] },
      budgets: { max_wall_time_ms: 60_000, max_cost: 2.5 },
      gates: { side_effect_class: "write" as const, require_approval: false },
      extensions: { "acme.a": 1, "acme.b": 1 },
    };
    const spec = {
      structural: { max_depth: 3 },
      candidates: { max_candidates_per_subtask: 20, allowed_node_type_ids: ["c", "b", "z"], denied_node_type_ids: ["y", "x"] },
      budgets: { max_wall_time_ms: 90_000, max_steps: 7 },
      gates: { side_effect_class: "read" as const, require_approval: true },
      extensions: { "acme.b": 2 },
    };
    const before = JSON.stringify([run, spec]);
    const merged = mergeConstraints(run, undefined, spec);
    expect(merged).toEqual({
      structural: { max_depth: 3, max_children_per_composite: 10 },
      candidates: { max_candidates_per_subtask: 10, allowed_node_type_ids: ["b", "c"], denied_node_type_ids: ["x", "y"] },
      budgets: { max_wall_time_ms: 60_000, max_cost: 2.5, max_steps: 7 },
      gates: { side_effect_class: "read", require_approval: true },
      extensions: { "acme.a": 1, "acme.b": 2 },
    });
    expect(JSON.stringify([run, spec])).toBe(before);
    expect(validatorFor("constraint_envelope")(merged)).toBe(true);
  });

  it("keeps an empty allow list (nothing allowed) and returns {} for no envelopes", () => {
    expect(mergeConstraints({ candidates: { allowed_node_type_ids: ["a"] } }, { candidates: { allowed_node_type_ids: ["b"] } })).toEqual({
      candidates: { allowed_node_type_ids: [] },
    });
    expect(mergeConstraints()).toEqual({});
    expect(mergeConstraints(null, undefined, {})).toEqual({});
    expect(mergeConstraints({ gates: { side_effect_class: "irreversible" } }, { gates: { side_effect_class: "write" } })).toEqual({ gates: { side_effect_class: "write" } });
  });

  it("returns a copy that shares nothing with its input", () => {
    const only = { candidates: { allowed_node_type_ids: ["a"] } };
    const merged = mergeConstraints(only);
    merged.candidates!.allowed_node_type_ids!.push("b");
    expect(only.candidates.allowed_node_type_ids).toEqual(["a"]);
  });
});
