"""What the agent needed later: does a context strategy keep the identifiers an agent uses next?

`identifiers` finds code-like identifiers in text, `texts` reads messages as the measure sees them,
`needed` decides which identifiers a request had to carry, `scoring` counts how many a forwarded
request kept, `placeholders` measures text that only stands for content left out, `attribution`
explains a loss, and `evaluate` runs all of it over one recorded conversation.
"""
