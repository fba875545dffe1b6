// End-to-end check of 'rein acp' with the official ACP TypeScript SDK as the
// client. Process 1: initialize, session/new, _rein/inject, session/prompt
// (a tool call), exit. Process 2: initialize, session/load; the whole
// history must arrive as session/update notifications before the answer,
// the injected context labelled as context, never as the user's words.
//
// Usage: REIN=/path/to/rein WORK=/workspace node client.mjs
// Prints one JSON summary line; exits non-zero with a reason on failure.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const rein = process.env.REIN;
const work = process.env.WORK;
if (!rein || !work) {
  console.error("set REIN and WORK");
  process.exit(2);
}

function fail(msg) {
  console.error("e2e: " + msg);
  process.exit(1);
}

// run starts 'rein acp' with args and runs op with a client context; it
// resolves with op's result once rein has exited cleanly.
async function run(args, op) {
  const child = spawn(rein, ["acp", ...args], { cwd: work, stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  let answered = false;
  const app = acp
    .client({ name: "rein-e2e" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push({ late: answered, update: params.update });
    })
    .onRequest(acp.methods.client.session.requestPermission, () => ({
      outcome: { outcome: "selected", optionId: "allow" },
    }));
  const result = await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "rein-e2e", version: "1" },
    });
    if (init.protocolVersion !== 1) fail("protocol version " + init.protocolVersion);
    if (!init.agentCapabilities?.loadSession) fail("loadSession is not advertised");
    return op(ctx, updates, () => {
      answered = true;
    });
  });
  child.stdin.end();
  const code = await exited;
  if (code !== 0) fail(`rein acp exited ${code}`);
  return result;
}

const text = (u) => u.content?.text ?? "";

// Process 1.
const first = await run(["--model", "scripted:e2e-script.json"], async (ctx, updates) => {
  const s = await ctx.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
  await ctx.request("_rein/inject", {
    sessionId: s.sessionId,
    content: [{ type: "text", text: "CI is red on main" }],
    source: { kind: "plugin", name: "ci-watch" },
  });
  const r = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: s.sessionId,
    prompt: [{ type: "text", text: "what does notes.txt say?" }],
  });
  if (r.stopReason !== "end_turn") fail("stop reason " + r.stopReason);
  const said = updates.filter((u) => u.update.sessionUpdate === "agent_message_chunk").map((u) => text(u.update)).join("");
  if (said !== "Let me read it.It says hello.") fail("live text: " + JSON.stringify(said));
  const done = updates.find((u) => u.update.sessionUpdate === "tool_call_update" && u.update.status === "completed");
  if (!done) fail("no completed tool call live");
  return { sessionId: s.sessionId, live: updates.length };
});

// Process 2: load and check the replay.
const replay = await run(["--model", "scripted:none.json"], async (ctx, updates, answer) => {
  await ctx.request(acp.methods.agent.session.load, { sessionId: first.sessionId, cwd: work, mcpServers: [] });
  answer();
  return updates;
});

const late = replay.filter((u) => u.late && u.update.sessionUpdate !== "available_commands_update");
if (late.length > 0) fail("updates after the load answer: " + JSON.stringify(late));
const kinds = replay.map((u) => u.update.sessionUpdate);
const userWords = replay.filter((u) => u.update.sessionUpdate === "user_message_chunk").map((u) => text(u.update));
if (JSON.stringify(userWords) !== JSON.stringify(["what does notes.txt say?"])) fail("user chunks: " + JSON.stringify(userWords));
const context = replay.find((u) => u.update.sessionUpdate === "tool_call" && u.update._meta?.rein?.entry === "context");
if (!context) fail("the injected context is not replayed as a labelled notice");
if (context.update.title !== "Context from plugin ci-watch") fail("context title: " + context.update.title);
const said = replay.filter((u) => u.update.sessionUpdate === "agent_message_chunk").map((u) => text(u.update)).join("");
if (said !== "Let me read it.It says hello.") fail("replayed text: " + JSON.stringify(said));
const call = replay.find((u) => u.update.sessionUpdate === "tool_call" && u.update.toolCallId === "call_read");
if (!call || call.update.kind !== "read") fail("no read tool call replayed");
const result = replay.filter((u) => u.update.sessionUpdate === "tool_call_update" && u.update.toolCallId === "call_read").pop();
if (!result || result.update.status !== "completed" || !JSON.stringify(result.update.content).includes("hello")) {
  fail("the tool call's final state is not replayed: " + JSON.stringify(result));
}
console.log(JSON.stringify({ ok: true, session: first.sessionId, live: first.live, replayed: replay.length, kinds: [...new Set(kinds)] }));
