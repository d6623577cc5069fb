// Prints the AI SDK tool set the installed agent-device package exports, as JSON.
//
//   node bench/agent_device_tools.mjs [core|all]
//
// Calls agent-device's public `createAgentDeviceTools({ session, set })` (`agent-device/ai-sdk`,
// deploy/agent-device/node_modules) and prints, per tool, what the AI SDK sends a model:
// name, description and the input JSON Schema. `ai` is agent-device's optional peer dependency
// and is not installed here; the only two functions the factory takes from it, `tool()` and
// `jsonSchema()`, are stood in for by a loader hook with what `ai` does with them for a request
// (`tool(t)` returns `t`; `jsonSchema(s)` wraps `s`, read back as `.jsonSchema`). Nothing runs:
// no daemon, no device; building the set reads only the command registry.
import { register } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

const AI_STAND_IN = "export const tool = (t) => t; export const jsonSchema = (s) => ({ jsonSchema: s });";
const hook = `
export async function resolve(specifier, context, next) {
  if (specifier === "ai") {
    return { url: "data:text/javascript," + encodeURIComponent(${JSON.stringify(AI_STAND_IN)}), shortCircuit: true };
  }
  return next(specifier, context);
}`;
register("data:text/javascript," + encodeURIComponent(hook), import.meta.url);

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.join(here, "..", "deploy", "agent-device", "node_modules", "agent-device");
const { createAgentDeviceTools } = await import(pathToFileURL(path.join(pkg, "dist", "src", "ai-sdk.js")).href);
const set = process.argv[2] ?? "core";
const { tools } = await createAgentDeviceTools({ session: "bench", set });
const version = JSON.parse(await (await import("node:fs/promises")).readFile(path.join(pkg, "package.json"), "utf8")).version;
const out = Object.entries(tools).map(([name, t]) => ({
  name,
  description: t.description,
  parameters: t.inputSchema.jsonSchema,
}));
process.stdout.write(JSON.stringify({ package: "agent-device", version, set, tools: out }) + "\n");
