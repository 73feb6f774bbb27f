/**
 * @nodefabric/core/testing: run a handler the way the fabric runs it, from a handler package's own tests; check it
 * against its schemas with generated inputs; or run whole trees through an in-process fabric. See docs/testing.md.
 */
/** One handler through a real in-process Atomic Executor: schemas, timeout, cancel, secrets, a MockAgent. */
export { runHandler, type RunHandlerOptions } from "./run-handler.js";
/** Property checks: inputs generated from the input_schema, every result held to the handler's contract. */
export {
  checkHandler,
  assertHandlerProperties,
  sampleInputs,
  type CheckHandlerOptions,
  type HandlerCheckReport,
  type PropertyViolation,
} from "./check-handler.js";
/** A whole fabric in the test's process, serving the definitions the test hands it. */
export { fabricFixture, type FabricFixture, type FabricFixtureOptions, type FixtureRunOptions } from "./fabric-fixture.js";
