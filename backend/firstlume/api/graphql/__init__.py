"""The GraphQL API (Strawberry): queries, mutations with typed results, live subscriptions."""
