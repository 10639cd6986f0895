// SPDX-License-Identifier: Apache-2.0
// Checks Kubernetes manifests offline, as the API server's schema would:
//   1. each YAML document parses (duplicate keys are errors);
//   2. kubernetes-models' validator (the Kubernetes OpenAPI schema compiled
//      to JSON Schema: types, required fields, enums, formats);
//   3. kubernetes-models' TypeScript types, compiled with tsc: an unknown
//      field (a misspelt `livenessProbe`) is an excess property, which the
//      JSON Schema above lets through;
//   4. within the pod templates: every volumeMount names a volume, and a
//      ConfigMap a volume names is among the manifests (Secrets may come
//      from the operator: listed with --external-secret).
// Usage: node check.js [--external-secret NAME]... FILE... ('-' reads stdin)
// Prints one line per problem, naming the file, the document and the path,
// then "manifests: N documents, M problems"; exits 1 on any problem.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const ts = require("typescript");

const args = process.argv.slice(2);
const externalSecrets = new Set();
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--external-secret") externalSecrets.add(args[++i]);
  else files.push(args[i]);
}
if (files.length === 0) {
  console.error("usage: node check.js [--external-secret NAME]... FILE...");
  process.exit(2);
}

const problems = [];
const docs = []; // { where, obj, modulePath, kind }

// kubernetes-models lays its models out as <group>/<version>/<Kind>, the core
// group as v1/<Kind>.
function modelPath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

for (const file of files) {
  const text = file === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(file, "utf8");
  const name = file === "-" ? "<stdin>" : file;
  YAML.parseAllDocuments(text).forEach((doc, i) => {
    const where = `${name} document ${i + 1}`;
    for (const e of doc.errors) problems.push(`${where}: YAML: ${e.message.split("\n")[0]}`);
    if (doc.errors.length) return;
    const obj = doc.toJS();
    if (obj === null || obj === undefined) return;
    if (typeof obj !== "object" || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
      problems.push(`${where}: not a Kubernetes object (apiVersion and kind are required)`);
      return;
    }
    const where2 = `${where} (${obj.kind} ${obj.metadata && obj.metadata.name})`;
    const mp = modelPath(obj.apiVersion, obj.kind);
    let Model;
    try {
      Model = require(mp)[obj.kind];
    } catch (e) {
      problems.push(`${where2}: ${obj.apiVersion} ${obj.kind} is not a Kubernetes API kind known to kubernetes-models`);
      return;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      problems.push(`${where2}: schema: ${e.message}`);
    }
    docs.push({ where: where2, obj, modulePath: mp, kind: obj.kind });
  });
}

// 3. The same objects as typed TypeScript literals.
if (docs.length) {
  const dir = fs.mkdtempSync(path.join(require("os").tmpdir(), "fa-manifests-"));
  const src = path.join(dir, "manifests.ts");
  let code = "";
  const lineOf = []; // first line of each document's literal
  docs.forEach((d, i) => {
    code += `import type { I${d.kind} as T${i} } from ${JSON.stringify(d.modulePath)};\n`;
  });
  docs.forEach((d, i) => {
    lineOf.push(code.split("\n").length);
    code += `export const m${i}: T${i} = ${JSON.stringify(d.obj, null, 1)};\n`;
  });
  fs.writeFileSync(src, code);
  const program = ts.createProgram([src], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    moduleResolution: ts.ModuleResolutionKind.Node10,
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2020,
    baseUrl: __dirname,
    typeRoots: [],
    paths: { "*": [path.join(__dirname, "node_modules", "*")] },
  });
  for (const diag of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, " ");
    let where = "types";
    if (diag.file && diag.start !== undefined) {
      const line = diag.file.getLineAndCharacterOfPosition(diag.start).line + 1;
      let k = 0;
      while (k + 1 < lineOf.length && lineOf[k + 1] <= line) k++;
      where = docs[k] ? docs[k].where : where;
      // The JSON path of the property the message is about.
      const text = diag.file.text;
      let p = diag.start;
      while (p > 0 && text[p - 1] !== "\n") p--;
      where += ` at ${text.slice(p, diag.start + 40).trim().split("\n")[0]}`;
    }
    problems.push(`${where}: types: ${msg}`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

// 4. References inside the manifests.
const configMaps = new Set(docs.filter((d) => d.kind === "ConfigMap").map((d) => d.obj.metadata.name));
const secrets = new Set(docs.filter((d) => d.kind === "Secret").map((d) => d.obj.metadata.name));
for (const d of docs) {
  const spec = d.obj.spec && d.obj.spec.template && d.obj.spec.template.spec;
  if (!spec) continue;
  const volumes = new Map((spec.volumes || []).map((v) => [v.name, v]));
  for (const c of [...(spec.initContainers || []), ...(spec.containers || [])])
    for (const m of c.volumeMounts || [])
      if (!volumes.has(m.name)) problems.push(`${d.where}: container ${c.name}: volumeMount ${m.name} names no volume`);
  for (const v of volumes.values()) {
    if (v.configMap && !configMaps.has(v.configMap.name))
      problems.push(`${d.where}: volume ${v.name}: ConfigMap ${v.configMap.name} is not among the manifests`);
    if (v.secret && !secrets.has(v.secret.secretName) && !externalSecrets.has(v.secret.secretName))
      problems.push(`${d.where}: volume ${v.name}: Secret ${v.secret.secretName} is not among the manifests`);
  }
}

for (const p of problems) console.log(p);
console.log(`manifests: ${docs.length} documents, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
