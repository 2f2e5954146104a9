"""Built-in toxic word lists per language (our own, deliberately short and unambiguous).

Profanity, sexual vulgarity and slurs that almost never occur in clean prose or news. Words
that violent news uses (``kill``, ``rape``, ``attack``, ``bomb``) are left out on purpose:
the toxicity rule must not drop crime reporting, and words with an innocent reading (a garden hoe, a
rooster, the name Dick) are left out too. ``*`` applies to every language. Replace or
extend them with ``ToxicityConfig(word_lists_uri=...)`` (JSON ``{"en": [...], "*": [...]}``)::

    from pretrain.filters.toxic_words import DEFAULT_WORD_LISTS
    "fucking" in DEFAULT_WORD_LISTS["en"]  # -> True

Entries of unsegmented languages (zh, ja) match as substrings; the others as whole words,
case-insensitively, and may be phrases of up to three words (hyphens count as spaces:
"anti-whites" matches "anti whites").
"""

from __future__ import annotations

DEFAULT_WORD_LISTS: dict[str, tuple[str, ...]] = {
    "en": (
        # profanity and insults
        "fuck", "fucks", "fucking", "fuckin", "fucked", "fucker", "fuckers", "motherfucker",
        "motherfuckers", "motherfucking", "fck", "fuk", "stfu", "wtf", "shit", "shits",
        "shitty", "bullshit", "shithead", "dipshit", "bitch", "bitches", "bitchy", "biatch",
        "cunt", "cunts", "dickhead", "dicks", "cocksucker", "pussy",
        "pussies", "slut", "sluts", "slutty", "whore", "whores", "asshole",
        "assholes", "arsehole", "bastards", "twat", "wanker", "wankers", "douchebag",
        "jackass", "dumbass", "retard", "retards", "retarded", "scumbag", "skank",
        # slurs
        "nigger", "niggers", "nigga", "niggas", "niggaz", "negroes", "faggot", "faggots",
        "dyke", "dykes", "tranny", "trannies", "kike", "kikes", "spic",
        "spics", "chink", "chinks", "wetback", "wetbacks", "raghead", "ragheads",
        "sandnigger", "gook", "gooks", "coon", "coons", "jigaboo", "beaner", "beaners",
        "mudshark", "muzzie", "muzzies", "zog", "subhuman", "subhumans", "mudpeople",
        "shitskin", "shitskins", "sheboon", "sheboons", "dindu", "dindus", "nignog", "nignogs",
        "groid", "groids", "racemixing", "mongrelization",
        # pornographic
        "porn", "porno", "pornhub", "blowjob", "blowjobs", "handjob", "cumshot", "milf",
        "hentai", "camgirl", "camgirls", "xxx",
        # coded white-supremacist vocabulary (phrases of up to 3 words match as whole words)
        "white genocide", "mud people", "mud race", "mud races", "mudslime", "mudslimes",
        "half breed", "half breeds", "halfbreed", "halfbreeds", "race traitor", "race traitors",
        "race mixer", "race mixers", "shegroid", "shegroids", "zogworld", "anti-whites",
        "dieversity", "jew media", "jewish supremacist", "jewish supremacists",
        "third worlders", "rahowa", "white power", "sieg heil", "heil hitler", "untermensch",
        "untermenschen", "towelhead", "towelheads", "jungle bunny", "jungle bunnies",
        "porch monkey", "porch monkeys", "jigaboos", "wigger", "wiggers", "race realist",
        "race realists",
    ),
    "de": (
        "scheiße", "scheisse", "scheiß", "scheiss", "arschloch", "arschlöcher", "fotze",
        "wichser", "hurensohn", "hurensöhne", "schlampe", "nutte", "ficken", "fick",
        "gefickt", "schwuchtel", "kanake", "kanaken", "missgeburt", "spast", "porno",
    ),
    "fr": (
        "merde", "putain", "connard", "connasse", "salope", "enculé", "enculés", "pute",
        "bite", "couille", "couilles", "nique", "niquer", "pédé", "pédés", "bougnoule",
        "négro", "porno",
    ),
    "es": (
        "mierda", "puta", "putas", "puto", "cabrón", "cabrones", "coño", "gilipollas",
        "joder", "pendejo", "pendejos", "maricón", "marica", "chinga", "chingada",
        "verga", "culero", "porno",
    ),
    "it": (
        "cazzo", "merda", "stronzo", "stronzi", "vaffanculo", "puttana", "troia",
        "frocio", "froci", "coglione", "coglioni", "porno",
    ),
    "pt": (
        "merda", "porra", "caralho", "puta", "putas", "foder", "fodido", "viado",
        "buceta", "cacete", "arrombado", "porno",
    ),
    "nl": (
        "kut", "klootzak", "godverdomme", "hoer", "neuken", "flikker",
        "mongool", "porno",
    ),
    "zh": ("操你妈", "傻逼", "他妈的", "妈的", "婊子", "贱人", "狗日的", "王八蛋"),
    "ja": ("死ね", "クソ野郎", "ちんこ", "まんこ"),
}  # fmt: skip

# Mentions of groups of people by race, religion, ethnicity, origin or sexual orientation
# (English). A sentence that names a group is flagged from a much lower model probability (``identity_threshold``): hate
# against a group is mostly said without insults ("the Jews control ...", "blacks are ..."),
# which a profanity model scores 0.1-0.4. Words with an innocent everyday reading ("white",
# "black", "race" alone: the White House, a black market, an arms race) only count in phrases.
IDENTITY_TERMS: dict[str, tuple[str, ...]] = {
    "en": (
        "whites", "blacks", "jews", "jewish", "jewry", "zionist", "zionists", "negro",
        "negroes", "negroid", "non-white", "non-whites", "nonwhite", "nonwhites", "muslim",
        "muslims", "islam", "islamic", "islamist", "islamists", "immigrant", "immigrants",
        "immigration", "aryan", "aryans", "racial", "racist", "racists", "racism", "mulatto",
        "mulattos", "asians", "hispanics", "mexicans", "africans", "arabs", "gypsies",
        "ethnic", "ethnicity", "ethnically", "multicultural", "multiculturalism", "diversity",
        "mixed race", "mixed-race", "race mixing", "race-mixing", "white race", "white people",
        "white man", "white men", "white women", "white nation", "white nations",
        "white nationalist", "white nationalists", "white europeans", "white children",
        "white kids", "white girl", "white girls", "white boy", "white boys", "white folk",
        "white folks", "white countries", "white society", "white culture", "black people",
        "black men", "black man", "black women", "black woman", "black kids", "black guy",
        "black guys", "black male", "black males", "black thug", "black thugs",
        "black community", "our race", "our people", "our folk", "our kind", "other race",
        "other races", "another race", "the white race", "the black race", "the jewish race",
        "jew", "goyim", "negros", "mulattoe", "mulattoes", "half caste", "half-caste",
        "mongrel", "mongrels", "anti-white", "non-european", "non-europeans", "interracial",
        "third world", "foreigners", "foreign nationals", "minorities", "african", "asian",
        "refugees", "asylum seekers", "migrants", "somalis", "pakistanis", "gypsy", "natives",
        "savages", "colored people", "coloured people", "brown people", "homosexual",
        "homosexuals", "homosexuality", "gays", "lesbians", "transgender", "tnb",
    ),
}  # fmt: skip

# Words of reporting (English): a sentence that holds one is flagged by a sentence model only
# from ``ToxicityConfig.reported_threshold``, since news that reports a threat or a slur does
# not endorse it ("charged with threatening to kill a congresswoman, prosecutors said": 0.77
# from the profanity model). Word lists still flag it.
REPORTING_TERMS: dict[str, tuple[str, ...]] = {
    "en": (
        "said", "says", "told", "according to", "reported", "reportedly", "quoted",
        "alleged", "allegedly", "accused", "charged", "convicted", "sentenced", "arrested",
        "indicted", "testified", "police", "prosecutor", "prosecutors", "authorities",
        "officials", "spokesman", "spokeswoman", "court", "judge", "jury", "investigators",
        "complaint", "affidavit",
    ),
}  # fmt: skip
