import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { layoutPlan, OUTPUTS_ID, planOf } from "../web/src/plan-layout";

// The node type page draws a declarative composite's plan from these: steps, the edges between them, and columns by
// depth, so that every arrow points rightwards.

const ref = { node_type_id: "demo.echo", version: "1.0.0" };

describe("the plan graph's layout", () => {
  it("finds dependencies in expressions and in after, and puts each step one column past what it waits for", () => {
    const g = layoutPlan({
      steps: [
        { id: "weather", node_type_ref: ref, inputs: { city: "{% inputs.city %}" } },
        { id: "each", node_type_ref: ref, for_each: "{% inputs.items %}", inputs: { c: "{% steps.weather.outputs.echo.city %}" } },
        { id: "audit", node_type_ref: ref, inputs: { note: "steps.weather is only text here" }, after: ["each"] },
        { id: "side", node_type_ref: ref, when: "{% steps . weather.outputs %}" },
      ],
      outputs: { all: "{% steps.each.outputs %}" },
    });
    const at = Object.fromEntries(g.steps.map((s) => [s.id, [s.column, s.row]]));
    expect(at).toEqual({ weather: [0, 0], each: [1, 0], audit: [2, 0], side: [1, 1], [OUTPUTS_ID]: [3, 0] });
    expect(g.edges).toEqual([
      ["weather", "each"],
      ["each", "audit"],
      ["weather", "side"],
      ["each", OUTPUTS_ID],
    ]);
    expect(g.steps.find((s) => s.id === "each")).toMatchObject({ forEach: true, nodeType: "demo.echo@1.0.0" });
    expect(g.steps.find((s) => s.id === "side")?.when).toBe(true);
    expect([g.columns, g.rows]).toEqual([4, 2]);
  });

  it("ignores references to steps the plan lacks, and does not hang on a cycle", () => {
    const g = layoutPlan({
      steps: [
        { id: "a", node_type_ref: ref, inputs: { x: "{% steps.b.outputs %}", y: "{% steps.ghost.outputs %}" } },
        { id: "b", node_type_ref: ref, after: ["a"] },
      ],
    });
    expect(g.edges).toEqual([
      ["b", "a"],
      ["a", "b"],
    ]);
    expect(g.steps).toHaveLength(3);
  });

  it("reads the plan of the examples' declarative composite", () => {
    const nt = JSON.parse(readFileSync(new URL("../../../handlers/examples/node-types/plan-greet.json", import.meta.url), "utf8"));
    const plan = planOf(nt);
    expect(plan?.steps).toHaveLength(2);
    const g = layoutPlan(plan!);
    expect(g.edges).toEqual([
      ["greet", "count"],
      ["greet", OUTPUTS_ID],
      ["count", OUTPUTS_ID],
    ]);
    expect(planOf({ extensions: {} })).toBeUndefined();
  });
});
