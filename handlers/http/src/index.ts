/**
 * @nodefabric/handler-http: `http.request`, the implementation of HTTP-backed node types that an operator publishes
 * through the registry with no code (`extensions["nodefabric.implementation"]` and `extensions["nodefabric.http"]`).
 */
import { httpRequest } from "./http-request.js";

export { httpRequest };
export { compileHttpConfig, hostAllowed, HTTP_EXTENSION, LIMITS, type HttpConfig } from "./http-config.js";
export { HTTP_FAILURE_CODES } from "./failure-codes.js";
export default httpRequest;
