/**
 * Which runs a coordinator holds in a PostgreSQL store shared by several (SharedRunStore), and the fencing of its
 * writes: each run held with the epoch it was taken over, created or renewed at; renewals, takeovers, release, and
 * the directory of coordinators.
 */
import pg from "pg";
import { clock, FencedError, trackCache, type CoordinatorRecord, type RunOwner, type RunRecord } from "@nodefabric/core";
import { ms, ts } from "./connect.js";
import { OPEN_RUN, TERMINAL } from "./pg-run-sql.js";
import { GROUPED_EVENTS_READER } from "./migrations.js";

/** Ended runs kept in `held` (so `holds` stays true for them); beyond this many, the oldest are forgotten. */
const MAX_ENDED_HELD = 50_000;

/** The runs one coordinator holds, as far as this process knows, and its leases on them. */
export class PgRunOwnership {
  /** The coordinator attached (SharedRunStore.attach), or undefined: then nothing is fenced. */
  owner: string | undefined;
  /** How long its leases last (ms). */
  leaseMs = 0;
  /** The epoch of each run this coordinator holds, as of its last takeover, creation or renewal. */
  private readonly held = new Map<string, number>();
  /** The held runs known to have ended: they stay held (ended runs stay leased) but need no renewal. */
  private readonly ended = new Set<string>();
  /** Runs a fenced write showed this coordinator had lost; the next renew reports them with the others. */
  private readonly lostSinceRenew = new Set<string>();
  /** When the leases were last renewed, and until when they are vouched for while renewals fail (see holds). */
  private renewedAt = clock.now();
  private vouchedUntil = Number.POSITIVE_INFINITY;

  constructor(private readonly pool: pg.Pool) {
    // The runs this coordinator holds: the open ones (work in flight) and at most MAX_ENDED_HELD ended ones.
    trackCache("store.pg_held_runs", this, (s) => ({ entries: s.held.size + s.lostSinceRenew.size }));
    trackCache("store.pg_ended_held_runs", this, (s) => ({ entries: s.ended.size }), { max_entries: MAX_ENDED_HELD });
  }

  attach(owner: string, leaseMs: number): void {
    if (this.owner !== undefined && this.owner !== owner) {
      this.held.clear();
      this.ended.clear();
      this.lostSinceRenew.clear();
    }
    this.owner = owner;
    this.leaseMs = leaseMs;
    this.renewedAt = clock.now();
  }

  /**
   * Whether this coordinator holds the run: taken, created or renewed by it, and not lost. While renewals fail (the
   * database is down) the runs stay held, but only for as long as their leases may still be running: past that, another
   * coordinator may have taken them, so none is vouched for (reads go to the store, which answers or is down) until a
   * renewal succeeds again and says which were lost.
   */
  holds(runId: string): boolean {
    return this.held.has(runId) && clock.now() <= this.vouchedUntil;
  }

  private attached(): string {
    if (this.owner === undefined) throw new Error("this run store is not attached to a coordinator: call shared.attach(owner, leaseMs) first");
    return this.owner;
  }

  async renew(now: number): Promise<{ lost: string[] }> {
    try {
      const out = await this.renewHeld(now);
      this.renewedAt = now;
      this.vouchedUntil = Number.POSITIVE_INFINITY;
      return out;
    } catch (err) {
      // The leases renewed last run out at renewedAt + leaseMs; from then on, none is vouched for.
      if (this.vouchedUntil === Number.POSITIVE_INFINITY) this.vouchedUntil = this.renewedAt + this.leaseMs;
      throw err;
    }
  }

  private async renewHeld(now: number): Promise<{ lost: string[] }> {
    const owner = this.attached();
    const ids = [...this.held.keys()].filter((id) => !this.ended.has(id)).sort();
    if (ids.length === 0) {
      const lost = [...this.lostSinceRenew];
      this.lostSinceRenew.clear();
      return { lost: lost.sort() };
    }
    const epochs = ids.map((id) => this.held.get(id)!);
    const sent = new Map(ids.map((id, i) => [id, epochs[i]]));
    // The SELECT reads the rows as they were before the UPDATE, which changes neither owner nor epoch.
    const { rows } = await this.pool.query<{ run_id: string; mine: boolean | null; open: boolean | null }>(
      `WITH h AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS h(run_id, epoch)),
            u AS (UPDATE runs r SET lease_expires_at = ${ts("$4")} FROM h
                  WHERE r.run_id = h.run_id AND r.lease_owner = $3 AND r.lease_epoch = h.epoch AND r.${OPEN_RUN}
                  RETURNING r.run_id)
       SELECT h.run_id, (r.lease_owner = $3 AND r.lease_epoch = h.epoch) AS mine, r.${OPEN_RUN} AS open
       FROM h LEFT JOIN runs r USING (run_id)`,
      [ids, epochs, owner, now + this.leaseMs],
    );
    // Read only now: when the renewal fails, they are reported by the next one.
    const lost = [...this.lostSinceRenew];
    this.lostSinceRenew.clear();
    for (const r of rows) {
      if (!r.mine) {
        // Only drop what is still the epoch we read: a takeover racing with this renewal may have set a new one.
        if (this.held.get(r.run_id) === sent.get(r.run_id)) this.forget(r.run_id, false);
        lost.push(r.run_id);
      } else if (!r.open) {
        // Ended (by another path than this store's apply): still held, no longer renewed.
        this.markEnded(r.run_id);
      }
    }
    return { lost: lost.sort() };
  }

  async takeOver(now: number, limit: number, runIds?: string[]): Promise<string[]> {
    const owner = this.attached();
    if (limit <= 0 || (runIds !== undefined && runIds.length === 0)) return [];
    const params: unknown[] = [owner, now, now + this.leaseMs, limit];
    const takeable = `${OPEN_RUN} AND (lease_owner IS NULL OR lease_expires_at < ${ts("$2")})`;
    // Without ids, two index ranges: leases that ran out (longest expired first) and runs nobody holds.
    const candidates =
      runIds !== undefined
        ? `run_id = ANY($${params.push(runIds)}::text[])`
        : `run_id IN (
             (SELECT run_id FROM runs WHERE ${OPEN_RUN} AND lease_owner IS NOT NULL AND lease_expires_at < ${ts("$2")}
              ORDER BY lease_expires_at LIMIT $4)
             UNION ALL
             (SELECT run_id FROM runs WHERE lease_owner IS NULL AND ${OPEN_RUN} ORDER BY run_id LIMIT $4))`;
    // FOR UPDATE re-checks the WHERE on the latest row version, so a run another coordinator took meanwhile is
    // left alone, and SKIP LOCKED passes over one it is taking right now.
    const { rows } = await this.pool.query<{ run_id: string; epoch: number }>(
      `WITH c AS (
         SELECT run_id FROM runs WHERE ${candidates} AND ${takeable}
         ORDER BY lease_expires_at NULLS FIRST, run_id LIMIT $4
         FOR UPDATE SKIP LOCKED)
       UPDATE runs SET lease_owner = $1, lease_expires_at = ${ts("$3")}, lease_epoch = runs.lease_epoch + 1
       FROM c WHERE runs.run_id = c.run_id
       RETURNING runs.run_id, runs.lease_epoch::float8 AS epoch`,
      params,
    );
    if (owner === this.owner) {
      for (const r of rows) {
        this.held.set(r.run_id, r.epoch);
        this.ended.delete(r.run_id);
        this.lostSinceRenew.delete(r.run_id);
      }
    }
    return rows.map((r) => r.run_id).sort();
  }

  async ownerOf(runId: string): Promise<RunOwner | undefined> {
    const { rows } = await this.pool.query<{ owner: string; endpoint: string | null; epoch: number; expires_at: number | null }>(
      `SELECT r.lease_owner AS owner, c.endpoint, r.lease_epoch::float8 AS epoch, ${ms("r.lease_expires_at")} AS expires_at
       FROM runs r LEFT JOIN coordinators c ON c.instance_id = r.lease_owner
       WHERE r.run_id = $1 AND r.lease_owner IS NOT NULL`,
      [runId],
    );
    const r = rows[0];
    return r && { owner: r.owner, endpoint: r.endpoint, epoch: r.epoch, expires_at: r.expires_at ?? 0 };
  }

  async release(now: number): Promise<string[]> {
    const owner = this.attached();
    // A lease that ended a millisecond ago: takeOver's "ran out before now" holds at once for every other coordinator.
    const { rows } = await this.pool.query<{ run_id: string }>(
      `UPDATE runs SET lease_expires_at = ${ts("$2")} WHERE lease_owner = $1 AND ${OPEN_RUN} AND lease_expires_at > ${ts("$2")} RETURNING run_id`,
      [owner, now - 1],
    );
    await this.pool.query(`UPDATE coordinators SET expires_at = ${ts("$2")} WHERE instance_id = $1`, [owner, now - 1]);
    return rows.map((r) => r.run_id).sort();
  }

  async announce(endpoint: string | null, now: number, ttlMs: number): Promise<void> {
    const owner = this.attached();
    // With the entry, the word that this coordinator reads grouped event rows: enabling them (migration 4) is refused
    // while a live coordinator in the directory has not said so, since it runs a release that would misread them.
    await this.pool.query(
      `WITH r AS (INSERT INTO nodefabric_settings (name, value) VALUES ($4::text || $1::text, 'yes') ON CONFLICT (name) DO NOTHING)
       INSERT INTO coordinators (instance_id, endpoint, expires_at) VALUES ($1, $2, ${ts("$3")})
       ON CONFLICT (instance_id) DO UPDATE SET endpoint = excluded.endpoint, expires_at = excluded.expires_at`,
      [owner, endpoint, now + ttlMs, GROUPED_EVENTS_READER],
    );
  }

  async coordinators(now: number): Promise<CoordinatorRecord[]> {
    const { rows } = await this.pool.query<CoordinatorRecord>(
      `SELECT instance_id, endpoint, ${ms("expires_at")} AS expires_at FROM coordinators
       WHERE expires_at >= ${ts("$1")} ORDER BY instance_id`,
      [now],
    );
    return rows;
  }

  /**
   * Fences a batch of `owner`: each run that existed before it (`locked`, as the batch's first statement locked them)
   * must be held by `owner` at the epoch it took it with. Those that are not are dropped from what this coordinator
   * holds (the next renew reports them), and FencedError refuses the batch.
   */
  fence(owner: string, locked: ReadonlyArray<{ run_id: string; lease_owner: string | null; epoch: number | null }>): void {
    const fenced = locked.filter((r) => r.lease_owner !== owner || this.held.get(r.run_id) !== r.epoch).map((r) => r.run_id);
    if (fenced.length > 0) {
      for (const id of fenced) this.forget(id, true);
      throw new FencedError(fenced);
    }
  }

  /** After a batch of `owner` committed: the runs it created are held from epoch 1, the held runs it ended marked ended. */
  committed(owner: string | undefined, inserted: readonly string[], runs: readonly RunRecord[]): void {
    if (owner !== undefined && owner === this.owner) {
      for (const id of inserted) this.held.set(id, 1);
      for (const r of runs) if (TERMINAL.has(r.state) && this.held.has(r.run_id)) this.markEnded(r.run_id);
    }
  }

  /** Drops a run from what this coordinator holds; `lost` reports it at the next renew. */
  private forget(runId: string, lost: boolean): void {
    this.ended.delete(runId);
    if (this.held.delete(runId) && lost) this.lostSinceRenew.add(runId);
  }

  private markEnded(runId: string): void {
    this.ended.add(runId);
    if (this.ended.size > MAX_ENDED_HELD) this.forget(this.ended.values().next().value as string, false);
  }
}
