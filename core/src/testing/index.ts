/**
 * @nodefabric/core/testing: run a handler the way the fabric runs it, from a handler package's own tests; check it
 * against its schemas with generated inputs; or run whole trees through an in-process fabric. See docs/testing.md.
 * `runHandler` and `checkHandler` are @nodefabric/sdk/testing's, re-exported; `fabricFixture` needs the whole fabric.
 */
/** One handler run as the Atomic Executor runs it: schemas, timeout, cancel, secrets, a MockAgent. */
export {
  runHandler,
  checkHandler,
  assertHandlerProperties,
  sampleInputs,
  DefinitionError,
  type RunHandlerOptions,
  type CheckHandlerOptions,
  type HandlerCheckReport,
  type PropertyViolation,
} from "@nodefabric/sdk/testing";
/** A whole fabric in the test's process, serving the definitions the test hands it. */
export { fabricFixture, type FabricFixture, type FabricFixtureOptions, type FixtureRunOptions } from "./fabric-fixture.js";
