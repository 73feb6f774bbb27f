/**
 * @nodefabric/sdk/samples: valid values of JSON Schemas, the examples given first, else made up small and the same
 * each time, each checked with the executor's own validator. The importers use them for the inputs of a README's
 * first run and of generated tests; a handler's tests can use them the same way.
 */
export { sampleFor, type SampleOptions, type SampleResult } from "./samples.js";
export { stringMatching, type StringMatchingOptions } from "./regex-matches.js";
export type { SchemaObject } from "./schema-object.js";
