// The normalized cache (Graphcache): runs, stacks, folders and organizations are stored once by
// key, so a run that changes in a subscription or a mutation changes on every screen showing it.
// What a mutation changes beyond the entity it returns is invalidated here, once, instead of each
// screen refetching by hand: the screens still showing it then read it again.
import { cacheExchange as graphcache, type Cache, type KeyingConfig } from "@urql/exchange-graphcache";
import introspection from "../graphql/schema";

type IntrospectedType = { kind: string; name: string; fields?: readonly { name: string }[] | null; possibleTypes?: readonly { name: string }[] | null };
const types = introspection.__schema.types as readonly IntrospectedType[];

// Unions and interfaces (the mutations' `Run | NotFoundError | …` results) match fragments by
// the schema, not by guessing from the data.
const possibleTypes: Record<string, string[]> = {};
for (const type of types) {
  if (type.possibleTypes?.length) possibleTypes[type.name] = type.possibleTypes.map((t) => t.name);
}

// Types without an id (steps, summaries, settings, changes, …) are values of their parent, not
// entities. Organizations are known by slug, the key every operation has at hand.
const keys: KeyingConfig = { Organization: (data) => (data.slug as string | undefined) ?? null };
for (const type of types) {
  if (type.kind === "OBJECT" && !type.name.startsWith("__") && !(type.name in keys) && !type.fields?.some((f) => f.name === "id")) {
    keys[type.name] = () => null;
  }
}

const organization = (org: unknown) => ({ __typename: "Organization", slug: String(org) });

function invalidateField(cache: Cache, entity: string | null, fieldName: string): void {
  if (!entity) return;
  for (const field of cache.inspectFields(entity)) {
    if (field.fieldName === fieldName) cache.invalidate(entity, field.fieldName, field.arguments ?? undefined);
  }
}

function linkedKeys(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(linkedKeys);
  return [];
}

/** Settings and variables are inherited: a change at one level changes what every level below shows. */
function invalidateLevels(cache: Cache, org: unknown): void {
  const orgKey = cache.keyOfEntity(organization(org));
  if (!orgKey) return;
  const levels = new Set<string>([orgKey]);
  for (const field of cache.inspectFields(orgKey)) {
    if (["folders", "rootFolders", "folder", "stacks", "rootStacks", "stack"].includes(field.fieldName)) {
      for (const key of linkedKeys(cache.resolve(orgKey, field.fieldName, field.arguments ?? undefined))) levels.add(key);
    }
  }
  for (const key of levels) {
    invalidateField(cache, key, "settings");
    invalidateField(cache, key, "variables");
  }
}

function invalidateTree(cache: Cache, org: unknown): void {
  const orgKey = cache.keyOfEntity(organization(org));
  for (const name of ["folders", "rootFolders", "folder", "stacks", "rootStacks", "stack"]) invalidateField(cache, orgKey, name);
}

export const cacheExchange = graphcache({
  keys,
  possibleTypes,
  updates: {
    Mutation: {
      // A new run belongs at the top of its stack's run lists.
      startRun(result, _args, cache) {
        const run = (result as { startRun?: { __typename?: string; stack?: { id?: string } } }).startRun;
        if (run?.__typename === "Run" && run.stack?.id) {
          invalidateField(cache, cache.keyOfEntity({ __typename: "Stack", id: run.stack.id }), "runs");
        }
      },
      createFolder(_result, args, cache) {
        invalidateTree(cache, args.org);
      },
      createStack(_result, args, cache) {
        invalidateTree(cache, args.org);
      },
      rotateWebhookSecret(_result, args, cache) {
        invalidateField(cache, cache.keyOfEntity(organization(args.org)), "webhookSecretSetAt");
      },
      // A renamed, moved or deleted stack or folder changes the tree, and what inherits from where.
      updateStack(_result, args, cache) {
        invalidateTree(cache, args.org);
        invalidateLevels(cache, args.org);
      },
      deleteStack(_result, args, cache) {
        invalidateTree(cache, args.org);
      },
      moveFolder(_result, args, cache) {
        invalidateTree(cache, args.org);
        invalidateLevels(cache, args.org);
      },
      deleteFolder(_result, args, cache) {
        invalidateTree(cache, args.org);
      },
      updateSettings(_result, args, cache) {
        invalidateLevels(cache, args.org);
      },
      setVariable(_result, args, cache) {
        invalidateLevels(cache, args.org);
      },
      deleteVariable(_result, args, cache) {
        invalidateLevels(cache, args.org);
      },
    },
  },
});
