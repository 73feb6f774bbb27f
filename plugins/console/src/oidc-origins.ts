/**
 * The origins a browser's OIDC login talks to, for the console's connect-src: the issuer (its discovery document) and
 * its token endpoint, which a provider may serve from another origin. The gateway reads the discovery document itself,
 * once, and again every 10 minutes (every minute while it fails); until it answers, the issuer's origin alone is
 * allowed.
 */
import { originOf } from "./security-headers.js";

const FRESH_MS = 10 * 60_000;
const RETRY_MS = 60_000;
const TIMEOUT_MS = 2_000;

export class OidcOrigins {
  private origins: string[];
  private checkedAt = 0;
  private okAt = 0;
  private pending: Promise<void> | undefined;

  constructor(private readonly issuer: string) {
    this.origins = [originOf(issuer)].filter((o): o is string => o !== undefined);
  }

  /** The origins known now, after a discovery when one is due (bounded by a short timeout). */
  async get(now = Date.now()): Promise<string[]> {
    const due = this.okAt > 0 ? now - this.okAt > FRESH_MS : now - this.checkedAt > RETRY_MS;
    if (due) {
      this.pending ??= this.discover(now).finally(() => (this.pending = undefined));
      await this.pending;
    }
    return this.origins;
  }

  private async discover(now: number): Promise<void> {
    this.checkedAt = now;
    try {
      const res = await fetch(`${this.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(TIMEOUT_MS), headers: { accept: "application/json" } });
      if (!res.ok) return;
      const doc = (await res.json()) as { token_endpoint?: unknown };
      const token = typeof doc.token_endpoint === "string" ? originOf(doc.token_endpoint) : undefined;
      this.origins = [...new Set([originOf(this.issuer), token].filter((o): o is string => o !== undefined))];
      this.okAt = now;
    } catch {
      // unreachable for now: the issuer's origin stays allowed, and the page says what failed if the login does
    }
  }
}
