/**
 * `assignment_token`: a short-lived bearer token the coordinator mints for one composite NodeRun, so its executor
 * can act for exactly that NodeRun (create and read its children, evaluate and complete it). Signed HS256 with a
 * key of this coordinator; verification at the coordinator's edge arrives with inbound authentication.
 */
import { randomBytes } from "node:crypto";
import { SignJWT, jwtVerify } from "jose";

export const ASSIGNMENT_AUDIENCE = "nodefabric-run-coordinator";

export interface AssignmentClaims {
  run_id: string;
  node_run_id: string;
}

/** Mints and checks assignment tokens with one secret. */
export class AssignmentTokens {
  private readonly key: Uint8Array;

  constructor(
    secret?: Uint8Array,
    private readonly ttlSeconds = 3600,
  ) {
    this.key = secret ?? randomBytes(32);
  }

  /** A token bound to (run_id, node_run_id). */
  mint(claims: AssignmentClaims): Promise<string> {
    return new SignJWT({ run_id: claims.run_id, node_run_id: claims.node_run_id, scope: "node-runs:write" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer(ASSIGNMENT_AUDIENCE)
      .setAudience(ASSIGNMENT_AUDIENCE)
      .setSubject(`node-run:${claims.node_run_id}`)
      .setIssuedAt()
      .setExpirationTime(`${this.ttlSeconds}s`)
      .sign(this.key);
  }

  /** The claims of a valid token, or undefined. */
  async verify(token: string): Promise<AssignmentClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ["HS256"], audience: ASSIGNMENT_AUDIENCE, issuer: ASSIGNMENT_AUDIENCE });
      if (typeof payload.run_id !== "string" || typeof payload.node_run_id !== "string") return undefined;
      return { run_id: payload.run_id, node_run_id: payload.node_run_id };
    } catch {
      return undefined;
    }
  }
}
