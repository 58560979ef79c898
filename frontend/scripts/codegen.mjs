// Checks every GraphQL operation of the UI against the server's schema and generates their
// TypeScript types, so a schema change that breaks the UI fails `npm run build` (here, with the
// file and line of each broken operation) or `tsc` (where the UI reads a field that changed).
//
//   node scripts/codegen.mjs            reads ../schema.graphql and src/graphql/*.graphql,
//                                       writes src/graphql/generated.ts
//   --schema <file> --out <file>        another schema or output (the tests check that a
//                                       schema change breaking the UI fails here)
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import {
  Kind,
  Source,
  buildSchema,
  getLocation,
  isAbstractType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  parse,
  print,
  validate,
} from "graphql";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const option = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 && process.argv[at + 1] ? process.argv[at + 1] : fallback;
};
const operationsDir = join(root, "src", "graphql");
const schemaPath = option("--schema", join(root, "..", "schema.graphql"));
const outputPath = option("--out", join(operationsDir, "generated.ts"));

const SCALARS = {
  ID: "string",
  String: "string",
  Int: "number",
  Float: "number",
  Boolean: "boolean",
  DateTime: "string",
  JSON: "JsonValue",
};

function fail(lines) {
  console.error(["GraphQL operations do not match schema.graphql:", ...lines].join("\n"));
  process.exit(1);
}

const schema = buildSchema(readFileSync(schemaPath, "utf8"));
const files = readdirSync(operationsDir)
  .filter((name) => name.endsWith(".graphql"))
  .sort();
const definitions = [];
for (const name of files) {
  const path = join(operationsDir, name);
  try {
    definitions.push(...parse(new Source(readFileSync(path, "utf8"), relative(root, path))).definitions);
  } catch (error) {
    fail([`  ${error.message}`]);
  }
}
const document = { kind: Kind.DOCUMENT, definitions };
const errors = validate(schema, document);
if (errors.length) {
  fail(
    errors.map((error) => {
      const where = (error.nodes ?? [])
        .filter((node) => node.loc)
        .map((node) => {
          const { line, column } = getLocation(node.loc.source, node.loc.start);
          return `${node.loc.source.name}:${line}:${column}`;
        })
        .join(", ");
      return `  ${where}  ${error.message}`;
    }),
  );
}

const fragments = new Map(
  definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
);
const operations = definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
for (const operation of operations) {
  if (!operation.name) fail([`  every operation needs a name (one at ${operation.loc?.source?.name})`]);
}

// Output types -------------------------------------------------------------------------------

function applies(typeCondition, objectType) {
  if (!typeCondition || typeCondition.name.value === objectType.name) return true;
  const condition = schema.getType(typeCondition.name.value);
  return isAbstractType(condition) && schema.isSubType(condition, objectType);
}

function collectFields(objectType, selectionSet, fields = new Map()) {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const key = selection.alias?.value ?? selection.name.value;
      if (!fields.has(key)) fields.set(key, []);
      fields.get(key).push(selection);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      if (applies(selection.typeCondition, objectType)) collectFields(objectType, selection.selectionSet, fields);
    } else {
      const fragment = fragments.get(selection.name.value);
      if (applies(fragment.typeCondition, objectType)) collectFields(objectType, fragment.selectionSet, fields);
    }
  }
  return fields;
}

const pad = (depth) => "  ".repeat(depth);

function objectShape(objectType, selectionSet, depth) {
  const lines = [];
  for (const [key, nodes] of collectFields(objectType, selectionSet)) {
    const name = nodes[0].name.value;
    if (name === "__typename") {
      lines.push(`${pad(depth + 1)}${key}: "${objectType.name}";`);
      continue;
    }
    const field = objectType.getFields()[name];
    const merged = nodes.some((n) => n.selectionSet)
      ? { kind: Kind.SELECTION_SET, selections: nodes.flatMap((n) => n.selectionSet?.selections ?? []) }
      : null;
    const description = field.description ? `${pad(depth + 1)}/** ${field.description.replace(/\*\//g, "* /")} */\n` : "";
    lines.push(`${description}${pad(depth + 1)}${key}: ${outputType(field.type, merged, depth + 1)};`);
  }
  return `{\n${lines.join("\n")}\n${pad(depth)}}`;
}

function selectionType(type, selectionSet, depth) {
  if (!isAbstractType(type)) return objectShape(type, selectionSet, depth);
  const variants = [...new Set(schema.getPossibleTypes(type).map((t) => objectShape(t, selectionSet, depth)))];
  return variants.length === 1 ? variants[0] : `(\n${pad(depth + 1)}| ${variants.join(`\n${pad(depth + 1)}| `)}\n${pad(depth)})`;
}

function outputType(type, selectionSet, depth) {
  if (isNonNullType(type)) return namedOutput(type.ofType, selectionSet, depth);
  return `${namedOutput(type, selectionSet, depth)} | null`;
}

function namedOutput(type, selectionSet, depth) {
  if (isListType(type)) return `Array<${outputType(type.ofType, selectionSet, depth)}>`;
  if (isScalarType(type)) return SCALARS[type.name] ?? "unknown";
  if (isEnumType(type)) return type.name;
  return selectionType(type, selectionSet, depth);
}

// Input types --------------------------------------------------------------------------------

function inputType(type) {
  if (isNonNullType(type)) return namedInput(type.ofType);
  return `${namedInput(type)} | null`;
}

function namedInput(type) {
  if (isListType(type)) return `Array<${inputType(type.ofType)}>`;
  if (isScalarType(type)) return SCALARS[type.name] ?? "unknown";
  return type.name;
}

function typeFromNode(node) {
  if (node.kind === Kind.NON_NULL_TYPE) return { kind: "nonNull", ofType: typeFromNode(node.type) };
  if (node.kind === Kind.LIST_TYPE) return { kind: "list", ofType: typeFromNode(node.type) };
  return schema.getType(node.name.value);
}

function variableType(node) {
  if (node.kind === Kind.NON_NULL_TYPE) return variableNamed(node.type);
  return `${variableNamed(node)} | null`;
}

function variableNamed(node) {
  if (node.kind === Kind.LIST_TYPE) return `Array<${variableType(node.type)}>`;
  return namedInput(typeFromNode(node));
}

// Documents ----------------------------------------------------------------------------------

function spreadsOf(selectionSet, found = new Set()) {
  for (const selection of selectionSet?.selections ?? []) {
    if (selection.kind === Kind.FRAGMENT_SPREAD && !found.has(selection.name.value)) {
      found.add(selection.name.value);
      spreadsOf(fragments.get(selection.name.value).selectionSet, found);
    } else if (selection.selectionSet) {
      spreadsOf(selection.selectionSet, found);
    }
  }
  return found;
}

const SUFFIX = { query: "Query", mutation: "Mutation", subscription: "Subscription" };
const out = [
  "// Generated by scripts/codegen.mjs from ../schema.graphql and src/graphql/*.graphql. Do not edit:",
  "// `npm run codegen` writes it again (and `npm run build` always does).",
  "/* eslint-disable */",
  "",
  "export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };",
  "",
  "/** An operation's text, carrying its result and variables types. */",
  "export type Doc<Result, Variables> = string & { readonly __result?: Result; readonly __variables?: Variables };",
  "",
];

for (const type of Object.values(schema.getTypeMap())) {
  if (type.name.startsWith("__")) continue;
  if (isEnumType(type)) {
    const values = type.getValues().map((v) => v.name);
    out.push(`export type ${type.name} = ${values.map((v) => JSON.stringify(v)).join(" | ")};`);
    out.push(`export const ${type.name}Values: readonly ${type.name}[] = ${JSON.stringify(values)};`, "");
  } else if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields()).map((field) => {
      const optional = !isNonNullType(field.type) || field.defaultValue !== undefined;
      return `  ${field.name}${optional ? "?" : ""}: ${inputType(field.type)};`;
    });
    out.push(`export type ${type.name} = {\n${fields.join("\n")}\n};`, "");
  }
}

for (const fragment of fragments.values()) {
  const type = schema.getType(fragment.typeCondition.name.value);
  out.push(`export type ${fragment.name.value}Fragment = ${selectionType(type, fragment.selectionSet, 0)};`, "");
}

for (const operation of operations) {
  const name = operation.name.value + SUFFIX[operation.operation];
  const rootType = schema.getRootType(operation.operation);
  const variables = (operation.variableDefinitions ?? []).map((definition) => {
    const optional = definition.type.kind !== Kind.NON_NULL_TYPE || definition.defaultValue;
    return `  ${definition.variable.name.value}${optional ? "?" : ""}: ${variableType(definition.type)};`;
  });
  const used = [...spreadsOf(operation.selectionSet)].sort().map((n) => fragments.get(n));
  const text = [operation, ...used].map((d) => print(d)).join("\n\n");
  out.push(`export type ${name} = ${objectShape(rootType, operation.selectionSet, 0)};`);
  out.push(`export type ${name}Variables = {${variables.length ? `\n${variables.join("\n")}\n` : ""}};`);
  out.push(`export const ${operation.name.value}Document = ${JSON.stringify(text)} as Doc<${name}, ${name}Variables>;`, "");
}

writeFileSync(outputPath, out.join("\n"));
console.log(`GraphQL: ${operations.length} operations and ${fragments.size} fragments valid against schema.graphql`);
