/**
 * The input and output schemas of node types: compiled and checked by the SDK runtime, where the executor and the
 * test harness both use them. Re-exported here for the services that compile handler schemas too.
 */
export { compileHandlerSchema, createHandlerAjv, schemaProblem, type HandlerAjvOptions } from "@nodefabric/sdk/runtime";
