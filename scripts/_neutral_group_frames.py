"""Our own neutral and supportive sentences about groups of people, clean rows for the model.

Written for this project (no third-party text): every frame is filled with every group, so the
group word carries no signal and the model learns from what is said about the group. Used by
``scripts/train_toxicity_model.py`` (development only; nothing here ships)::

    from _neutral_group_frames import neutral_group_sentences
    neutral_group_sentences()[:2]
"""

from __future__ import annotations

# (plural, singular with article)
GROUPS = (
    ("women", "a woman"), ("men", "a man"), ("gay people", "a gay man"),
    ("lesbians", "a lesbian"), ("bisexual people", "a bisexual woman"),
    ("trans people", "a trans woman"), ("black people", "a black man"),
    ("white people", "a white woman"), ("disabled people", "a disabled person"),
    ("people with disabilities", "a wheelchair user"), ("Muslims", "a Muslim"),
    ("Jews", "a Jewish man"), ("Christians", "a Christian"), ("Hindus", "a Hindu"),
    ("immigrants", "an immigrant"), ("refugees", "a refugee"), ("migrants", "a migrant"),
    ("Asians", "an Asian woman"), ("Chinese people", "a Chinese student"),
    ("Mexicans", "a Mexican"), ("Latinos", "a Latina"), ("Hispanics", "a Hispanic family"),
    ("Arabs", "an Arab"), ("Africans", "an African"), ("Native Americans", "a Native American"),
    ("black women", "a black woman"), ("Muslim women", "a Muslim woman"),
    ("deaf people", "a deaf person"), ("blind people", "a blind person"),
    ("people with mental illness", "someone with depression"), ("LGBTQ people", "a queer teenager"),
)  # fmt: skip
PLURAL_FRAMES = (
    "{P} have lived in this valley for more than a century.",
    "The festival showcases the cooking and music of {p}.",
    "{P} are still underrepresented on corporate boards.",
    "A new exhibit at the museum traces the history of {p} in the region.",
    "{P} should have the same rights as every other citizen.",
    "Lots of {p} volunteer at the shelter every weekend.",
    "Discrimination against {p} in hiring is still common, the study found.",
    "The survey asked {p} how safe they feel at work.",
    "{P} often face long waits for health care.",
    "{P} have shaped the culture of this country in many ways.",
    "We should listen when {p} describe their own experiences.",
    "You will find {p} in every profession, from nursing to farming.",
    "Stereotypes about {p} are lazy and usually false.",
    "The climbing club is open to {p} and to anyone else who wants to join.",
    "My parents raised me to treat {p} with the same respect as anyone.",
    "{P} want what everyone wants: a home, a job and a safe street.",
    "The mayor met with {p} to hear their concerns about the schools.",
    "Many {p} in our town run small shops and restaurants.",
    "Violence against {p} increased last year, the report said.",
    "It is unfair to blame all {p} for what one person did.",
    "Jokes that put down {p} are not funny.",
    "Not all {p} think alike, any more than the rest of us do.",
    "{P} have won prizes in science, sport and the arts.",
    "The novel follows three {p} who open a bookshop together.",
    "Several of our best teachers are {p}.",
    "The law protects {p} from being fired for who they are.",
    "The film follows {p} rebuilding their lives after the flood.",
    "It is great to see more {p} running for office.",
    "The charity helps {p} who have lost their homes.",
    "She wrote her dissertation on {p} in nineteenth-century cities.",
    "Thanks to all the {p} who told us their stories.",
    "I really admire the {p} in my neighbourhood.",
    "{P} are kind, funny and hard-working, like most people.",
    "I am proud to count {p} among my closest friends.",
    "Our company is better because {p} work here.",
    "Welcoming {p} has made our city stronger.",
    "{P} deserve to be treated with dignity.",
    "Some people say hateful things about {p}, and they are wrong.",
    "Saying that {p} are dangerous is a lie.",
    "The idea that {p} are inferior has no basis in fact.",
)
SINGULAR_FRAMES = (
    "My new neighbour is {s} who teaches chemistry.",
    "Last year {s} was elected to the city council.",
    "The award went to {s} for her work on clean water.",
    "I had lunch with {s} from the reading group.",
    "{S} opened the bakery on the corner of our street.",
    "The team is coached by {s} who played professionally.",
    "The hospital is run by {s} with thirty years of experience.",
    "Being {s} should never cost anyone a job.",
)


def neutral_group_sentences() -> list[str]:
    """Every frame filled with every group, in a fixed order."""
    out = []
    for plural, singular in GROUPS:
        out += [f.format(p=plural, P=plural[0].upper() + plural[1:]) for f in PLURAL_FRAMES]
        out += [f.format(s=singular, S=singular[0].upper() + singular[1:]) for f in SINGULAR_FRAMES]
    return out
