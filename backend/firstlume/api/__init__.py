"""The ways in: GraphQL (api.graphql) and the REST compatibility routes (api.rest)."""
