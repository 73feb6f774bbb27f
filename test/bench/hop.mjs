/**
 * One hop of the chained floor, in a process of its own (as each service of a split fabric is): a fastify server
 * whose POST /echo forwards the parsed body to `--next` with undici and answers what came back, or, without `--next`,
 * answers the echo itself. Prints `listening <url>` once it listens; SIGTERM closes it.
 */
import Fastify from "fastify";
import { parseArgs } from "node:util";
import { Pool } from "undici";

const { values: args } = parseArgs({ options: { next: { type: "string" }, connections: { type: "string", default: "64" } } });

const app = Fastify({ logger: false });
if (args.next) {
  const pool = new Pool(args.next, { connections: Number(args.connections), pipelining: 1 });
  app.addHook("onClose", async () => pool.close());
  app.post("/echo", async (req) => {
    const res = await pool.request({ method: "POST", path: "/echo", headers: { "content-type": "application/json" }, body: JSON.stringify(req.body) });
    return res.body.json();
  });
} else {
  app.post("/echo", async (req) => ({ state: "completed", outputs: { echo: req.body.inputs ?? req.body.input } }));
}
await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`listening http://127.0.0.1:${app.server.address().port}\n`);
process.once("SIGTERM", () => app.close().then(() => process.exit(0)));
