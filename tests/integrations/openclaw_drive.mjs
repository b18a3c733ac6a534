// Drives the memory-ls OpenClaw plugin through OpenClaw's own code, without a chat model:
// the agent tools as OpenClaw assembles them for a run (its plugin loader and tool resolver,
// `resolvePluginTools`), and the memory slot's manager as OpenClaw's host resolves it
// (`openclaw/plugin-sdk/memory-host-search` getActiveMemorySearchManager).
// Usage: node openclaw_drive.mjs <openclaw package dir> <steps.json>; prints one JSON object.
// Env: OPENCLAW_HOME (the temp home holding .openclaw/openclaw.json) as the CLI reads it.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [ocDir, stepsFile] = process.argv.slice(2);
const steps = JSON.parse(fs.readFileSync(stepsFile, "utf8"));
const dist = path.join(ocDir, "dist");

/** The dist chunk exporting `name` (its file name carries a build hash): found by its source. */
async function importChunkExport(marker, name) {
  for (const file of fs.readdirSync(dist)) {
    if (!file.endsWith(".mjs")) continue;
    const text = fs.readFileSync(path.join(dist, file), "utf8");
    if (!text.includes(marker)) continue;
    const alias = new RegExp(`\\b${name} as (\\w+)\\b`).exec(text.slice(text.lastIndexOf("export {")))?.[1];
    const mod = await import(pathToFileURL(path.join(dist, file)).href);
    const fn = mod[alias ?? name];
    if (typeof fn === "function") return fn;
  }
  throw new Error(`no dist chunk exports ${name} (${marker})`);
}

const { getRuntimeConfig } = await import(pathToFileURL(path.join(dist, "plugin-sdk", "memory-core-host-runtime-core.js")).href);
const { getActiveMemorySearchManager, closeActiveMemorySearchManagers } = await import(
  pathToFileURL(path.join(dist, "plugin-sdk", "memory-host-search.js")).href
);
const resolvePluginTools = await importChunkExport("function resolvePluginTools(params)", "resolvePluginTools");

const config = getRuntimeConfig();
const agentId = "main";
/** The tools of one agent's run (a step's `agentId`: an agent of agents.entries, with its workspace). */
const toolsByAgent = new Map();
function toolsOf(id) {
  if (toolsByAgent.has(id)) return toolsByAgent.get(id);
  const listed = config.agents?.entries?.[id] ?? (config.agents?.list ?? []).find((a) => a?.id === id);
  const workspaceDir = listed?.workspace ?? config.agents?.defaults?.workspace;
  const resolved = resolvePluginTools({
    context: { config, runtimeConfig: config, workspaceDir, agentId: id, sessionKey: `agent:${id}:main` },
    existingToolNames: new Set(),
  });
  const byName = new Map(resolved.map((t) => [t.name, t]));
  toolsByAgent.set(id, byName);
  return byName;
}
const tools = [...toolsOf(agentId).values()];
const byName = toolsOf(agentId);
const out = { tools: tools.map((t) => ({ name: t.name, label: t.label, description: t.description, parameters: t.parameters })), steps: [] };

let lastCitation = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (const step of steps) {
  const started = Date.now();
  let result;
  try {
    if (step.op === "tool") {
      const tool = byName.get(step.name);
      if (!tool) throw new Error(`tool ${step.name} not registered`);
      // "$cited": the citation of the previous step's first hit, as the model would pass it on.
      const params = step.params.path === "$cited" ? { ...step.params, path: lastCitation } : step.params;
      const answer = await tool.execute(`call-${out.steps.length}`, params, undefined, undefined);
      lastCitation = answer.details?.results?.[0]?.citation ?? lastCitation;
      result = { details: answer.details, text: answer.content?.[0]?.text };
    } else if (step.op === "hits") {
      // A memory_search of step.agentId's tools, answered compactly: the ranked citations, the
      // engine's mode and provider (bench/openclaw_eval.py scores these).
      const tool = toolsOf(step.agentId ?? agentId).get("memory_search");
      if (!tool) throw new Error(`memory_search not registered for ${step.agentId ?? agentId}`);
      const answer = await tool.execute(`hits-${out.steps.length}`, step.params, undefined, undefined);
      const d = answer.details ?? {};
      result = {
        hits: (d.results ?? []).map((r) => [r.path, r.startLine, r.endLine, r.score, r.source]),
        // memory-core says its mode in debug: keyword-only when its embedding provider failed.
        mode: d.mode ?? d.debug?.embeddingBootstrap?.degradedTo ?? d.debug?.effectiveMode,
        provider: d.provider,
        ...(d.fallback ? { fallback: d.fallback } : {}),
        ...(d.error ? { error: d.error, warning: d.warning } : {}),
      };
    } else if (step.op === "manager") {
      const { manager, error } = await getActiveMemorySearchManager({ cfg: config, agentId, purpose: step.purpose });
      if (!manager) throw new Error(error ?? "no manager");
      if (step.method === "search") result = await manager.search(step.query, step.opts ?? {});
      else if (step.method === "readFile") result = await manager.readFile(step.params);
      else if (step.method === "status") {
        await manager.sync?.({ reason: "test" });
        result = manager.status();
      } else throw new Error(`unknown method ${step.method}`);
    } else if (step.op === "write") {
      fs.mkdirSync(path.dirname(step.path), { recursive: true });
      fs.writeFileSync(step.path, step.text);
      result = { wrote: step.path };
    } else if (step.op === "until") {
      // Repeats a memory_search until a hit's path matches, for at most step.withinMs (with
      // step.whole: in an answer that is not partial, once the first sync is done).
      const tool = byName.get("memory_search");
      let found = null;
      let tries = 0;
      while (Date.now() - started < step.withinMs) {
        tries += 1;
        const answer = await tool.execute(`until-${tries}`, { query: step.query }, undefined, undefined);
        found = answer.details.results?.find((r) => r.path === step.path) ?? null;
        if (found && step.whole && answer.details.partial) found = null;
        if (found) break;
        await sleep(200);
      }
      result = { found, tries };
    } else throw new Error(`unknown op ${step.op}`);
    out.steps.push({ op: step.op, ok: true, ms: Date.now() - started, result });
  } catch (error) {
    out.steps.push({ op: step.op, ok: false, ms: Date.now() - started, error: error instanceof Error ? error.message : String(error) });
  }
}
await closeActiveMemorySearchManagers(config).catch(() => {});
// Exit once the answer is written: a large one (bench/openclaw_eval.py) goes out in pieces.
process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0));
