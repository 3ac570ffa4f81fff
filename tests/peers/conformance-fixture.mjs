#!/usr/bin/env node
// A stdio MCP server (protocol 2025-11-25, legacy handshake) with the tools, prompts and resources
// that the @modelcontextprotocol/conformance server scenarios call by name (test_simple_text,
// test_sampling, test://static-text, ...). server-everything has none of them, so against it most
// scenarios fail for lack of a fixture; run behind supergateway (and bir), this fixture lets those
// scenarios exercise the proxy: progress, logging, sampling and elicitation round trips,
// embedded resources, images and audio.
//
// Written from the scenario descriptions that `conformance list`/the runner print; plain Node, no
// dependencies, newline-delimited JSON-RPC on stdin/stdout, diagnostics on stderr only.
// Usage: node tests/peers/conformance-fixture.mjs

import { createInterface } from "node:readline";

const PROTOCOL = "2025-11-25";
// 1x1 red pixel PNG
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
// 44-byte WAV header + 2 samples of silence (8 kHz, mono, 16 bit)
const WAV = Buffer.from(
  "52494646" + "28000000" + "57415645" + "666d7420" + "10000000" + "0100" + "0100" + "401f0000" + "803e0000" +
    "0200" + "1000" + "64617461" + "04000000" + "00000000",
  "hex",
).toString("base64");

let clientCapabilities = {};
let logLevel = "debug";
const LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
const subscriptions = new Set();
let nextServerId = 0;
const pendingServer = new Map(); // id -> {resolve, reject}

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}
function notify(method, params) {
  send({ jsonrpc: "2.0", method, params });
}
function log(level, data) {
  if (LEVELS.indexOf(level) >= LEVELS.indexOf(logLevel)) {
    notify("notifications/message", { level, logger: "conformance-fixture", data });
  }
}
function request(method, params) {
  const id = nextServerId++;
  send({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve, reject) => {
    pendingServer.set(id, { resolve, reject });
    setTimeout(() => {
      if (pendingServer.delete(id)) reject(new Error(`${method} timed out`));
    }, 30000).unref();
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: "text", text: t }] });
class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

const noArgs = { type: "object", properties: {} };
const TOOLS = {
  test_simple_text: {
    description: "Returns simple text",
    inputSchema: noArgs,
    run: async () => text("This is a simple text response for testing."),
  },
  test_image_content: {
    description: "Returns an image",
    inputSchema: noArgs,
    run: async () => ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }),
  },
  test_audio_content: {
    description: "Returns audio",
    inputSchema: noArgs,
    run: async () => ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }),
  },
  test_embedded_resource: {
    description: "Returns an embedded resource",
    inputSchema: noArgs,
    run: async () => ({
      content: [
        {
          type: "resource",
          resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
        },
      ],
    }),
  },
  test_multiple_content_types: {
    description: "Returns text, image and resource",
    inputSchema: noArgs,
    run: async () => ({
      content: [
        { type: "text", text: "Multiple content types test:" },
        { type: "image", data: PNG, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: JSON.stringify({ test: "data", value: 123 }),
          },
        },
      ],
    }),
  },
  test_tool_with_logging: {
    description: "Sends three log messages while running",
    inputSchema: noArgs,
    run: async () => {
      log("info", "Tool execution started");
      await sleep(50);
      log("info", "Tool processing data");
      await sleep(50);
      log("info", "Tool execution completed");
      return text("Tool with logging executed successfully");
    },
  },
  test_error_handling: {
    description: "Always fails",
    inputSchema: noArgs,
    run: async () => ({ isError: true, content: [{ type: "text", text: "This tool intentionally returns an error for testing" }] }),
  },
  test_tool_with_progress: {
    description: "Reports progress 0, 50, 100 of 100",
    inputSchema: noArgs,
    run: async (args, meta) => {
      const token = meta?.progressToken;
      for (const [i, p] of [0, 50, 100].entries()) {
        if (i) await sleep(50);
        if (token !== undefined) notify("notifications/progress", { progressToken: token, progress: p, total: 100 });
      }
      return text("Tool with progress executed successfully");
    },
  },
  test_sampling: {
    description: "Asks the client for an LLM completion",
    inputSchema: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
    run: async (args) => {
      if (!clientCapabilities.sampling) throw new RpcError(-32602, "client does not support sampling");
      const r = await request("sampling/createMessage", {
        messages: [{ role: "user", content: { type: "text", text: String(args.prompt ?? "") } }],
        maxTokens: 100,
      });
      const c = Array.isArray(r.content) ? r.content.find((x) => x.type === "text") : r.content;
      return text(`LLM response: ${c && c.type === "text" ? c.text : JSON.stringify(r.content)}`);
    },
  },
  test_elicitation: {
    description: "Asks the user for a username and email",
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    run: async (args) => {
      if (!clientCapabilities.elicitation) throw new RpcError(-32602, "client does not support elicitation");
      const r = await request("elicitation/create", {
        message: String(args.message ?? ""),
        requestedSchema: {
          type: "object",
          properties: {
            username: { type: "string", description: "User's response" },
            email: { type: "string", description: "User's email address" },
          },
          required: ["username", "email"],
        },
      });
      return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  test_elicitation_sep1034_defaults: {
    description: "Elicitation with defaults for every primitive type",
    inputSchema: noArgs,
    run: async () => {
      const r = await request("elicitation/create", {
        message: "Please review and update the form fields with defaults",
        requestedSchema: {
          type: "object",
          properties: {
            name: { type: "string", description: "User name", default: "John Doe" },
            age: { type: "integer", description: "User age", default: 30 },
            score: { type: "number", description: "User score", default: 95.5 },
            status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
            verified: { type: "boolean", description: "Verification status", default: true },
          },
          required: [],
        },
      });
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  test_elicitation_sep1330_enums: {
    description: "Elicitation with the five enum variants",
    inputSchema: noArgs,
    run: async () => {
      const r = await request("elicitation/create", {
        message: "Please select options from the enum fields",
        requestedSchema: {
          type: "object",
          properties: {
            untitledSingle: { type: "string", description: "Untitled single-select", enum: ["option1", "option2", "option3"] },
            titledSingle: {
              type: "string",
              description: "Titled single-select",
              oneOf: [
                { const: "value1", title: "First Option" },
                { const: "value2", title: "Second Option" },
                { const: "value3", title: "Third Option" },
              ],
            },
            legacyEnum: {
              type: "string",
              description: "Legacy titled enum",
              enum: ["opt1", "opt2", "opt3"],
              enumNames: ["Option One", "Option Two", "Option Three"],
            },
            untitledMulti: {
              type: "array",
              description: "Untitled multi-select",
              items: { type: "string", enum: ["option1", "option2", "option3"] },
            },
            titledMulti: {
              type: "array",
              description: "Titled multi-select",
              items: {
                anyOf: [
                  { const: "value1", title: "First Choice" },
                  { const: "value2", title: "Second Choice" },
                  { const: "value3", title: "Third Choice" },
                ],
              },
            },
          },
          required: [],
        },
      });
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  json_schema_2020_12_tool: {
    description: "Tool with JSON Schema 2020-12 features",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
    run: async (args) => text(`Received: ${JSON.stringify(args)}`),
  },
};

const RESOURCES = {
  "test://static-text": {
    name: "static-text",
    description: "A static text resource",
    mimeType: "text/plain",
    read: (uri) => ({ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }),
  },
  "test://static-binary": {
    name: "static-binary",
    description: "A static binary resource (PNG)",
    mimeType: "image/png",
    read: (uri) => ({ uri, mimeType: "image/png", blob: PNG }),
  },
  "test://watched-resource": {
    name: "watched-resource",
    description: "A resource to subscribe to",
    mimeType: "text/plain",
    read: (uri) => ({ uri, mimeType: "text/plain", text: "Watched resource content." }),
  },
};
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = {
  test_simple_prompt: {
    description: "A prompt without arguments",
    get: () => [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  },
  test_prompt_with_arguments: {
    description: "A prompt with two required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
    get: (a) => [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` } }],
  },
  test_prompt_with_embedded_resource: {
    description: "A prompt embedding a resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
    get: (a) => [
      {
        role: "user",
        content: {
          type: "resource",
          resource: { uri: a.resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
        },
      },
      { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
    ],
  },
  test_prompt_with_image: {
    description: "A prompt with an image",
    get: () => [
      { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  },
};

async function handle(method, params) {
  switch (method) {
    case "initialize":
      clientCapabilities = params?.capabilities ?? {};
      return {
        protocolVersion: PROTOCOL,
        capabilities: {
          tools: { listChanged: false },
          prompts: { listChanged: false },
          resources: { subscribe: true, listChanged: false },
          logging: {},
          completions: {},
        },
        serverInfo: { name: "bir-conformance-fixture", version: "0.1.0" },
      };
    case "ping":
      return {};
    case "logging/setLevel":
      if (!LEVELS.includes(params?.level)) throw new RpcError(-32602, `unknown level ${params?.level}`);
      logLevel = params.level;
      return {};
    case "tools/list":
      return {
        tools: Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema })),
      };
    case "tools/call": {
      const t = TOOLS[params?.name];
      if (!t) return { isError: true, content: [{ type: "text", text: `Unknown tool: ${params?.name}` }] };
      return t.run(params.arguments ?? {}, params._meta);
    }
    case "resources/list":
      return {
        resources: Object.entries(RESOURCES).map(([uri, r]) => ({ uri, name: r.name, description: r.description, mimeType: r.mimeType })),
      };
    case "resources/templates/list":
      return {
        resourceTemplates: [
          { uriTemplate: "test://template/{id}/data", name: "template", description: "A resource template", mimeType: "application/json" },
        ],
      };
    case "resources/read": {
      const uri = params?.uri;
      if (RESOURCES[uri]) return { contents: [RESOURCES[uri].read(uri)] };
      const m = TEMPLATE.exec(uri ?? "");
      if (m) {
        const id = decodeURIComponent(m[1]);
        return {
          contents: [{ uri, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
        };
      }
      throw new RpcError(-32002, `Resource not found: ${uri}`, { uri });
    }
    case "resources/subscribe":
      subscriptions.add(params?.uri);
      return {};
    case "resources/unsubscribe":
      subscriptions.delete(params?.uri);
      return {};
    case "prompts/list":
      return {
        prompts: Object.entries(PROMPTS).map(([name, p]) => ({
          name,
          description: p.description,
          ...(p.arguments ? { arguments: p.arguments } : {}),
        })),
      };
    case "prompts/get": {
      const p = PROMPTS[params?.name];
      if (!p) throw new RpcError(-32602, `Unknown prompt: ${params?.name}`);
      const args = params.arguments ?? {};
      for (const a of p.arguments ?? []) {
        if (a.required && args[a.name] === undefined) throw new RpcError(-32602, `Missing argument ${a.name}`);
      }
      return { messages: p.get(args) };
    }
    case "completion/complete": {
      const value = String(params?.argument?.value ?? "");
      const pool = ["paris", "park", "party", "hello", "world"];
      const values = pool.filter((v) => v.startsWith(value));
      return { completion: { values, total: values.length, hasMore: false } };
    }
    default:
      throw new RpcError(-32601, "Method not found");
  }
}

function onMessage(msg) {
  if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return;
  if (msg.method === undefined) {
    // a response to one of our requests
    const p = pendingServer.get(msg.id);
    if (!p) return;
    pendingServer.delete(msg.id);
    if (msg.error) p.reject(new RpcError(msg.error.code, msg.error.message));
    else p.resolve(msg.result ?? {});
    return;
  }
  if (msg.id === undefined) return; // notifications: initialized, cancelled, ... nothing to do
  handle(msg.method, msg.params).then(
    (result) => send({ jsonrpc: "2.0", id: msg.id, result }),
    (e) =>
      send({
        jsonrpc: "2.0",
        id: msg.id,
        error: { code: e instanceof RpcError ? e.code : -32603, message: String(e?.message ?? e), ...(e?.data ? { data: e.data } : {}) },
      }),
  );
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    return;
  }
  onMessage(msg);
});
rl.on("close", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
console.error("bir conformance fixture ready (stdio)");
